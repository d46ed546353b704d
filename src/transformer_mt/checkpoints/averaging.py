"""Averaging checkpoints: the mean of several checkpoints' weights, written as a new checkpoint,
and the epoch checkpoints of a training run (what task=average and task.last_n average).

Epoch checkpoints are `<run>/checkpoints/epochs/epochNNN-stepNNNNNNN.ckpt` (weights only, each with
the val/bleu of its epoch). An average keeps the hyper-parameters and tokenizer of the first one and
loads like any checkpoint.
"""

import logging
from pathlib import Path

import torch

from transformer_mt.atomic import atomic_file
from transformer_mt.checkpoints.loading import checkpoint_tokenizer, read_checkpoint
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.progress import ProgressBar

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
        raise DataError(f"{paths[0]}: not a transformer-mt checkpoint (no tokenizer)")
    sums = {k: v.double() if v.is_floating_point() else v for k, v in first["state_dict"].items()}
    for path in paths[1:]:
        other = read_checkpoint(path)
        check_compatible(paths[0], first, path, other)
        for name, value in other["state_dict"].items():
            if value.is_floating_point():
                sums[name] += value.double()
            elif not torch.equal(value, sums[name]):
                raise DataError(f"{path}: integer tensor {name} differs from {paths[0]}'s")
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
        raise DataError(f"{path}: parameters differ from {first_path} (missing {missing[:3]}, extra {extra[:3]})")
    for name in a:
        if a[name].shape != b[name].shape:
            raise DataError(f"{path}: {name} has shape {tuple(b[name].shape)}, "
                              f"{first_path} has {tuple(a[name].shape)}")
    ha, hb = first["hyper_parameters"].get("model"), other.get("hyper_parameters", {}).get("model")
    if ha != hb:
        keys = sorted(k for k in set(ha) | set(hb or {}) if ha.get(k) != (hb or {}).get(k))
        raise DataError(f"{path}: model.{keys[0]} differs from {first_path}'s")
    if checkpoint_tokenizer(first) != checkpoint_tokenizer(other):
        raise DataError(f"{path}: its tokenizer differs from {first_path}'s")


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
