"""model.init_from: what a training run starts from when it fine-tunes an existing model.

    model.init_from=outputs/train/<run>                      # one of our runs: the checkpoint it tested
    model.init_from=outputs/train/<run>/checkpoints/best.ckpt   # one of our checkpoints
    model.init_from=/path/to/opus-mt-en-de                    # a local Marian folder (interop/marian.py)
    model.init_from=/path/to/m2m100_418M                      # a local M2M-100 folder (interop/m2m100.py)

Either way the run takes the model's architecture (its `model.*` keys but the dropouts, which stay
as configured), its weights as the initial ones and its vocabularies as the run's tokenizer; the
optimizer, the schedule, the step counter and the best-checkpoint tracking start afresh.
"""

import json
from pathlib import Path

import torch
from omegaconf import DictConfig

from transformer_mt.checkpoints.files import is_hub_folder
from transformer_mt.checkpoints.loading import checkpoint_tokenizer, model_weights, read_checkpoint
from transformer_mt.config import plain
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.interop.hub_folder import read_hub_folder
from transformer_mt.tasks.runs.preflight import missing_init_from

TRAINING_KEYS = ("dropout", "attention_dropout", "activation_dropout")  # the run's, not the model's


def architecture(model: DictConfig | dict) -> dict:
    """The Transformer's keys of a model config (conf/model): all but `init_from` and `new_tokens`,
    which say where the weights and vocabulary come from, not what the model is."""
    return {key: value for key, value in plain(model).items() if key not in ("init_from", "new_tokens")}


def read_init_from(path: Path) -> tuple[dict, dict[str, torch.Tensor], Vocabularies]:
    """(architecture keys, the Transformer's state_dict, the vocabularies) of model.init_from."""
    if is_hub_folder(path):  # a Hugging Face folder: Marian, or M2M-100 / NLLB
        return read_hub_folder(path, "model.init_from")
    checkpoint_file = run_checkpoint(path) if path.is_dir() else path
    if not checkpoint_file.is_file():
        raise missing_init_from(path)
    checkpoint = read_checkpoint(checkpoint_file, key="model.init_from")
    tokenizer = checkpoint_tokenizer(checkpoint)
    if tokenizer is None:
        raise DataError(f"model.init_from={checkpoint_file}: the checkpoint has no tokenizer")
    model = {k: v for k, v in checkpoint["hyper_parameters"]["model"].items() if k not in TRAINING_KEYS}
    weights = model_weights(checkpoint)
    return model, weights, Vocabularies.from_dict(tokenizer)


def run_checkpoint(run_dir: Path) -> Path:
    """The checkpoint a run folder stands for: the one its test used (metrics.json's
    tested_checkpoint: average.ckpt with task.last_n, else best.ckpt), else best.ckpt."""
    metrics = run_dir / "metrics.json"
    tested = json.loads(metrics.read_text()).get("tested_checkpoint") if metrics.is_file() else None
    candidates = [run_dir / "checkpoints" / Path(tested).name] if tested else []
    for candidate in (*candidates, run_dir / "checkpoints" / "best.ckpt"):
        if candidate.is_file():
            return candidate
    raise DataError(f"model.init_from={run_dir}: a folder with neither config.json (a Marian model) nor "
                      "checkpoints/best.ckpt (a run of ours)")


def preset_model() -> dict | None:
    """The `model` node as its preset (this job's model=NAME) alone composes it; None outside Hydra."""
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    hydra = HydraConfig.get()
    preset = f"model={hydra.runtime.choices['model']}"
    return plain(compose(config_name=hydra.job.config_name, overrides=[preset]).model)


def check_architecture(model_cfg, source: dict, path: Path) -> None:
    """The run's architecture is the starting model's (`source`). A `model.KEY` set away from its
    preset's value (on the command line or by an experiment preset) to another value than the
    starting model's is one line naming both (the dropouts are the run's to set)."""
    preset = preset_model()
    if preset is None:
        return
    for key in sorted(k for k in source if k not in TRAINING_KEYS):
        value = plain(model_cfg.get(key))
        if value != preset.get(key) and value != source[key]:
            raise ConfigError(f"model.{key}={value}, but model.init_from={path} is a model with "
                              f"model.{key}={source[key]}: drop model.{key}, or train a new model")
