"""Reading checkpoints: finding one, loading it as plain data, its vocabularies and its model's
weights, and a description of the data it was trained on."""

import pickle
import re
from pathlib import Path

import torch
from omegaconf import DictConfig

from transformer_mt.checkpoints.files import file_damage, unreadable
from transformer_mt.checkpoints.upgrades import upgrade
from transformer_mt.config import plain
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.validate import Refusal, refuse


def describe_corpus(data: dict) -> str:
    """One line naming a data config's corpora: each one's class and plain options (data.corpora's
    after their names)."""
    def one(corpus: dict) -> str:
        corpus = dict(corpus)
        name = str(corpus.pop("_target_", "?")).rsplit(".", 1)[-1]
        if corpus.get("weight") == 1 and corpus.get("tag") is None:  # how it is mixed: said only when it is
            corpus.pop("weight"), corpus.pop("tag")
        if corpus.get("target_tag") is None:
            corpus.pop("target_tag", None)
        return f"{name}({', '.join(f'{k}={v}' for k, v in corpus.items() if not isinstance(v, dict | list))})"

    named = [one(data["corpus"])] if data.get("corpus") else []
    named += [f"{name}: {one(corpus)}" for name, corpus in (data.get("corpora") or {}).items()]
    return " + ".join(named) or "no corpus"


def decode_device_refusal(trainer: DictConfig) -> Refusal:
    """Why task=translate and task=score cannot run where `trainer` asks (one device: the CPU, or one
    GPU there is), or None."""
    accelerator, devices = str(trainer.get("accelerator", "auto")), plain(trainer.get("devices", 1))
    if accelerator not in ("auto", "cpu", "gpu", "cuda"):
        return f"trainer.accelerator={accelerator}: translating and scoring run on auto, cpu or gpu"
    if accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available()):
        return None
    if not torch.cuda.is_available():
        return f"trainer.accelerator={accelerator}: no CUDA GPU is available"
    one_gpu = len(devices) == 1 if isinstance(devices, list) else devices in (1, "1", "auto")
    if not one_gpu:
        return f"trainer.devices={devices}: translating and scoring run on one GPU, trainer.devices=[N]"
    return None


def task_device(trainer: DictConfig) -> torch.device:
    """Where task=translate and task=score run: trainer.accelerator (auto: a GPU if there is one,
    else the CPU | cpu | gpu) and, on a GPU, trainer.devices=[N] for GPU N (one device)."""
    refuse(decode_device_refusal(trainer))
    accelerator, devices = str(trainer.get("accelerator", "auto")), plain(trainer.get("devices", 1))
    if accelerator == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", int(devices[0])) if isinstance(devices, list) else torch.device("cuda")


def task_devices(trainer: DictConfig) -> list[torch.device]:
    """Where work that shares out (the synthetic stage of task=distill and task=backtranslate) runs:
    trainer.devices of trainer.accelerator's devices. On the CPU, N is N processes (each a share of
    the threads); on GPUs, N is the first N, [A, B] those, -1 or auto all of them."""
    devices = plain(trainer.get("devices", 1))
    if isinstance(devices, list) and devices and all(isinstance(d, int) and d >= 0 for d in devices):
        count = len(devices)
    elif devices in (-1, "-1", "auto"):
        count = None
    elif isinstance(devices, int) and devices >= 1:
        count = devices
    else:
        raise ConfigError(f"trainer.devices={devices}: a number >= 1, a list of GPU numbers, -1 or auto")
    one = task_device({**trainer, "devices": [devices[0]] if isinstance(devices, list) else 1})
    if one.type == "cpu":
        return [one] * (count or 1)
    ids = devices if isinstance(devices, list) else range(count or torch.cuda.device_count())
    return [torch.device("cuda", int(i)) for i in ids]


def read_checkpoint(path: Path, key: str = "ckpt_path") -> dict:
    """A checkpoint loaded as plain data (weights_only=True, on the CPU), in today's layout whatever
    version wrote it (checkpoints/upgrades.py). Memory-mapped: tensors are read only when used, so
    looking at a checkpoint's tokenizer or metrics costs little. Errors name `key`, the config key
    that gave the path."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # a truncated or foreign file: say which one, and how it is damaged
        raise unreadable(key, path, damage(path, err)) from err
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict) \
            or "model" not in (checkpoint.get("hyper_parameters") or {}):
        raise DataError(f"{key}={path}: not a transformer-mt checkpoint (it has no state_dict and model "
                          "hyper-parameters)")
    try:
        return upgrade(checkpoint)
    except ValueError as err:
        raise DataError(f"{key}={path}: {err}") from None


def damage(path: Path, err: Exception) -> str:
    """Why torch could not read `path`, in words: the file's own damage (files.file_damage), Python
    objects a weights-only load refuses, or torch's error."""
    if (why := file_damage(path)) is not None:
        return why
    if isinstance(err, pickle.UnpicklingError) and "Weights only load failed" in str(err):
        found = re.search(r"(?:Unsupported global: |unsupported )GLOBAL ([\w.]+)", str(err))
        what = f" ({found[1]})" if found else ""
        return (f"it holds Python objects{what} beyond tensors and plain data, which are never unpickled here: "
                "loading them would run their code, and a transformer-mt checkpoint holds none")
    return f"{type(err).__name__}: {' '.join(str(err).split())[:160]}"


def checkpoint_tokenizer(checkpoint: dict) -> dict | None:
    """The vocabularies of a checkpoint (as `read_checkpoint` gives it) as plain data."""
    return checkpoint["hyper_parameters"].get("tokenizer")


def model_weights(checkpoint: dict) -> dict[str, torch.Tensor]:
    """The Transformer's state_dict in a checkpoint (as `read_checkpoint` gives it): the module's
    `model.` entries, that prefix stripped. The one rule for it."""
    return {k.removeprefix("model."): v for k, v in checkpoint["state_dict"].items() if k.startswith("model.")}
