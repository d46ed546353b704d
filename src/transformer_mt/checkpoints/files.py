"""Checkpoint files as paths, without torch: the checkpoints `ckpt_path` names, the tested
checkpoint a run folder stands for (task.teacher, task.reverse), and what is wrong with a file
that is no checkpoint at all (empty, cut short, another kind of file). The tasks check these before
torch is imported (tasks/runs/preflight.py) and again when they read the files (loading.py)."""

import json
import zipfile
from pathlib import Path

from omegaconf import DictConfig

from transformer_mt.choices import OWN_LAST
from transformer_mt.config import plain
from transformer_mt.errors import ConfigError, DataError


def checkpoint_path(cfg: DictConfig) -> Path:
    """cfg.ckpt_path, one checkpoint, checked to exist."""
    given = plain(cfg.get("ckpt_path"))
    if given and not isinstance(given, str):
        raise ConfigError(f"ckpt_path={given}: this task takes one checkpoint (a list, ckpt_path=[a.ckpt,b.ckpt], "
                          "is an ensemble for task=translate, task=score and task=evaluate, or what task=average "
                          "averages)")
    return checkpoint_paths(cfg)[0]


def is_hub_folder(path: Path) -> bool:
    """Whether `path` is a Hugging Face model folder (a folder with a transformers config.json:
    interop/hub_folder.py reads it), which ckpt_path and model.init_from take as a model."""
    return path.is_dir() and (path / "config.json").is_file()


def checkpoint_paths(cfg: DictConfig) -> list[Path]:
    """cfg.ckpt_path as a list: one checkpoint, or several (ckpt_path=[a,b,...]: an ensemble's
    members, or the checkpoints task=average averages), each checked to exist."""
    given = plain(cfg.get("ckpt_path"))
    if not given:
        raise ConfigError("this task needs ckpt_path=PATH (a checkpoint written by task=train)")
    if given == OWN_LAST:
        raise ConfigError("ckpt_path=last resumes task=train from its own run folder; this task needs ckpt_path=PATH "
                          "(a checkpoint file)")
    paths = [Path(p) for p in ([given] if isinstance(given, str) else given)]
    for path in paths:
        if not path.is_file() and not is_hub_folder(path):
            raise DataError(f"ckpt_path={path}: no such file")
    return paths


def model_checkpoints(given, key: str) -> list[Path]:
    """A model named by `key` (task.teacher, task.reverse) as checkpoint files: a run folder stands
    for its tested checkpoint, a list for an ensemble."""
    if given in (None, "", []):
        raise ConfigError(f"{key}: name the model (a run folder, a checkpoint, or a list of them)")
    paths = []
    for each in [given] if isinstance(given, str) else given:
        path = Path(each)
        if path.is_dir():
            path = Path(finished_run(path, key)["tested_checkpoint"])
        if not path.is_file():
            raise DataError(f"{key}={each}: no such checkpoint")
        paths.append(path)
    return paths


def finished_run(folder: Path, key: str) -> dict:
    """The metrics.json of a finished training run in `folder` (`key`: the setting that names it)."""
    path = folder / "metrics.json"
    if not folder.is_dir():
        raise DataError(f"{key}={folder}: no such folder")
    if not path.is_file():
        raise DataError(f"{key}={folder}: a folder without metrics.json (not a finished training run)")
    return json.loads(path.read_text())


def file_damage(path: Path) -> str | None:
    """Why `path` cannot be a checkpoint whatever it holds, in words (empty; cut short: a checkpoint
    is a zip file whose directory is at its end; another kind of file), or None."""
    size = path.stat().st_size if path.is_file() else None
    if size == 0:
        return "the file is empty, 0 bytes"
    if size is not None and not zipfile.is_zipfile(path):
        with open(path, "rb") as f:
            zip_start = f.read(4) == b"PK\x03\x04"
        if zip_start:
            return f"it is cut short: {size:,} bytes, without the end of a checkpoint"
        return f"{size:,} bytes that are not a torch checkpoint"
    return None


def unreadable(key: str, path: Path, why: str) -> ConfigError:
    """The one line of a checkpoint that cannot be read: `KEY=PATH: not a readable ... (WHY)`."""
    return ConfigError(f"{key}={path}: not a readable transformer-mt checkpoint ({why})")


def check_checkpoint_files(paths: list[Path], key: str) -> list[Path]:
    """`paths`, each refused (`unreadable`) if it cannot be a checkpoint whatever it holds."""
    for path in paths:
        if (why := file_damage(path)) is not None:
            raise unreadable(key, path, why)
    return paths
