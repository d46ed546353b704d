"""task=average: average the parameters of several checkpoints into a new checkpoint.

    python run.py task=average checkpoints=[a.ckpt,b.ckpt] [output=avg.ckpt]
    python run.py task=average run_dir=outputs/train/<run> last_n=5     # the last 5 epochs
    python run.py task=average run_dir=outputs/train/<run> best_n=5     # the 5 best by val/bleu

Epoch checkpoints are `<run_dir>/checkpoints/epochs/epochNNN.ckpt` (weights only, each with the
val/bleu of its epoch). The result keeps the hyper-parameters and tokenizer of the first one and
loads in task=evaluate and task=translate like any checkpoint.
"""

import logging
from pathlib import Path

import torch
from omegaconf import DictConfig

from transformer_mt.atomic import atomic_file
from transformer_mt.errors import ConfigError
from transformer_mt.progress import ProgressBar
from transformer_mt.tasks.checkpoints import checkpoint_tokenizer, read_checkpoint

log = logging.getLogger(__name__)

KEEP = ("state_dict", "hyper_parameters", "tokenizer", "pytorch-lightning_version", "hparams_name", "epoch",
        "global_step")


def average_checkpoints(paths: list[Path], bar: ProgressBar | None = None) -> dict:
    """A checkpoint whose floating-point tensors are the mean of those of `paths` (`bar` advanced
    by one per checkpoint read)."""
    if not paths:
        raise ConfigError("task=average needs at least one checkpoint")
    first = read_checkpoint(paths[0])
    if bar is not None:
        bar.advance()
    if checkpoint_tokenizer(first) is None:
        raise ConfigError(f"{paths[0]}: not a transformer-mt checkpoint (no tokenizer)")
    sums = {k: v.double() if v.is_floating_point() else v for k, v in first["state_dict"].items()}
    for path in paths[1:]:
        other = read_checkpoint(path)
        check_compatible(paths[0], first, path, other)
        for name, value in other["state_dict"].items():
            if value.is_floating_point():
                sums[name] += value.double()
            elif not torch.equal(value, sums[name]):
                raise ConfigError(f"{path}: integer tensor {name} differs from {paths[0]}'s")
        if bar is not None:
            bar.advance()
    state = first["state_dict"]
    averaged = {k: (v / len(paths)).to(state[k].dtype) if state[k].is_floating_point() else v for k, v in sums.items()}
    tied: dict[tuple, str] = {}  # tied weights (one tensor under several names) stay one tensor: saved once
    for name, value in state.items():
        key = (value.data_ptr(), value.shape, value.stride())
        averaged[name] = averaged[tied.setdefault(key, name)]
    out = {k: first[k] for k in KEEP if k in first}
    out["state_dict"] = averaged
    out["averaged_from"] = [str(p) for p in paths]
    return out


def check_compatible(first_path: Path, first: dict, path: Path, other: dict) -> None:
    """Same parameter names and shapes, same model hyper-parameters, same tokenizer."""
    a, b = first["state_dict"], other.get("state_dict", {})
    if a.keys() != b.keys():
        missing, extra = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
        raise ConfigError(f"{path}: parameters differ from {first_path} (missing {missing[:3]}, extra {extra[:3]})")
    for name in a:
        if a[name].shape != b[name].shape:
            raise ConfigError(f"{path}: {name} has shape {tuple(b[name].shape)}, "
                              f"{first_path} has {tuple(a[name].shape)}")
    ha, hb = first["hyper_parameters"].get("model"), other.get("hyper_parameters", {}).get("model")
    if ha != hb:
        keys = sorted(k for k in set(ha) | set(hb or {}) if ha.get(k) != (hb or {}).get(k))
        raise ConfigError(f"{path}: model.{keys[0]} differs from {first_path}'s")
    if checkpoint_tokenizer(first) != checkpoint_tokenizer(other):
        raise ConfigError(f"{path}: its tokenizer differs from {first_path}'s")


def select_checkpoints(cfg: DictConfig) -> list[Path]:
    """cfg.checkpoints, or the last_n / best_n epoch checkpoints of cfg.run_dir."""
    if cfg.get("checkpoints"):
        paths = [Path(p) for p in cfg.checkpoints]
        for p in paths:
            if not p.is_file():
                raise ConfigError(f"checkpoints: {p}: no such file")
        return paths
    if not cfg.get("run_dir") or bool(cfg.get("last_n")) == bool(cfg.get("best_n")):
        raise ConfigError("task=average needs checkpoints=[...], or run_dir=DIR with one of last_n=N / best_n=N")
    run_dir = Path(cfg.run_dir)
    folder, found = epoch_folder(run_dir), epoch_checkpoints(run_dir)
    if not found:
        raise ConfigError(f"run_dir={cfg.run_dir}: no epoch checkpoints in {folder}")
    n = int(cfg.last_n or cfg.best_n)
    if n > len(found):
        raise ConfigError(f"{'last_n' if cfg.last_n else 'best_n'}={n}, but {folder} has only {len(found)}")
    if cfg.last_n:
        return found[-n:]
    scored = [(read_checkpoint(p).get("val_bleu"), p) for p in found]
    unscored = [p for s, p in scored if s is None]
    if unscored:
        raise ConfigError(f"{unscored[0]}: no val_bleu recorded, so best_n cannot rank it")
    return [p for _, p in sorted(scored, key=lambda sp: -sp[0])[:n]]


def epoch_folder(run_dir: Path) -> Path:
    """Where a run keeps its epoch checkpoints."""
    return run_dir / "checkpoints" / "epochs"


def epoch_checkpoints(run_dir: Path) -> list[Path]:
    """A run's epoch checkpoints (one per validation), oldest first."""
    return sorted(epoch_folder(run_dir).glob("epoch*.ckpt"))


def write_average(paths: list[Path], output: Path, progress: bool | None = None) -> Path:
    """The average of `paths`, written whole to `output` (never half-written); `progress`: the
    top-level key (a bar on stderr)."""
    with ProgressBar("averaging", len(paths), "checkpoints", progress) as bar:
        averaged = average_checkpoints(paths, bar)
    with atomic_file(output) as tmp, open(tmp, "wb") as f:  # a file: a full disk is an OSError (ENOSPC)
        torch.save(averaged, f)
    log.info("averaged %d checkpoints (%s ... %s) into %s", len(paths), paths[0].name, paths[-1].name, output)
    return output


def run(cfg: DictConfig) -> dict:
    paths = select_checkpoints(cfg)
    output = Path(cfg.output) if cfg.get("output") else Path(cfg.paths.output_dir) / "average.ckpt"
    write_average(paths, output, cfg.get("progress"))
    print(output)
    return {"output": str(output), "checkpoints": [str(p) for p in paths]}
