"""Reading checkpoints: finding one, loading it as plain data, its vocabularies, a ready module
built from it, and a description of the data it was trained on."""

from pathlib import Path

import torch
from omegaconf import DictConfig

from transformer_mt.config import plain
from transformer_mt.errors import ConfigError


def describe_corpus(data: dict) -> str:
    """One line naming a data config's corpus: its class and its plain options."""
    corpus = dict(data.get("corpus") or {})
    name = str(corpus.pop("_target_", "?")).rsplit(".", 1)[-1]
    return f"{name}({', '.join(f'{k}={v}' for k, v in corpus.items() if not isinstance(v, dict | list))})"


def checkpoint_path(cfg: DictConfig) -> Path:
    """cfg.ckpt_path, checked to exist."""
    if not cfg.get("ckpt_path"):
        raise ConfigError("this task needs ckpt_path=PATH (a checkpoint written by task=train)")
    path = Path(cfg.ckpt_path)
    if not path.is_file():
        raise ConfigError(f"ckpt_path={path}: no such file")
    return path


def read_checkpoint(path: Path) -> dict:
    """A checkpoint loaded as plain data (weights_only=True, on the CPU). Memory-mapped: tensors are
    read only when used, so looking at a checkpoint's tokenizer or metrics costs little."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # a truncated or foreign file: say which one
        reason = err.__class__.__name__
        raise ConfigError(f"ckpt_path={path}: not a readable transformer-mt checkpoint ({reason})") from err
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict) \
            or "model" not in (checkpoint.get("hyper_parameters") or {}):
        raise ConfigError(f"ckpt_path={path}: not a transformer-mt checkpoint (it has no state_dict and model "
                          "hyper-parameters)")
    return checkpoint


def checkpoint_tokenizer(checkpoint: dict) -> dict | None:
    """The vocabularies of a checkpoint as plain data: the module's `tokenizer` hyper-parameter, or
    where checkpoints written before it kept them (a top-level "tokenizer": that dict, or in the
    first checkpoints one joint `tokenizers` JSON string)."""
    saved = checkpoint.get("hyper_parameters", {}).get("tokenizer") or checkpoint.get("tokenizer")
    if isinstance(saved, str):
        saved = {"src": {"kind": "tokenizers", "data": saved}, "tgt": None}
    return saved


def load_module(path: Path, decoding: dict | DictConfig | None = None):
    """A ready TranslationModule (eval mode, on the CPU) built from a checkpoint, read once with
    weights_only=True: its hyper-parameters, its weights as `initial_weights`; with `decoding`, it
    searches with that strategy instead of its own."""
    from transformer_mt.training.module import TranslationModule  # the module is built only here

    checkpoint = read_checkpoint(path)
    hparams = dict(checkpoint["hyper_parameters"])
    if "tokenizer" not in hparams:  # written before the tokenizer was a hyper-parameter
        hparams["tokenizer"] = checkpoint_tokenizer(checkpoint)
        if hparams["tokenizer"] is None:
            raise ConfigError(f"ckpt_path={path}: the checkpoint has no tokenizer")
    if decoding is not None:
        hparams["decoding"] = plain(decoding)
    weights = {name.removeprefix("model."): value for name, value in checkpoint["state_dict"].items()}
    return TranslationModule(**hparams, initial_weights=weights).eval()


