"""What a training run starts from, settled and checked before any part of it is built.

    start = checked_start(cfg)   # every check that needs no data; the config, the vocabularies,
                                 # the weights and the checkpoint the run starts from, and its update plan

A run starts from nothing (random weights, vocabularies trained on its data or read from the
cache or `data.tokenizer.file`), from a model to fine-tune (`model.init_from`: one of our
checkpoints or runs, or a Marian folder: its architecture, vocabulary and weights; see
tasks/runs/init_from.py) or from a checkpoint it resumes (`ckpt_path`: read once here; its
vocabularies; its weights, optimizer and position are restored by `trainer.fit(ckpt_path=...)`).

`cfg.model` is the one group that is no constructor call: it says which model to build (the
Transformer's keys, `TransformerConfig` without the vocabulary sizes) and `init_from`, where its
weights start. With `init_from`, the run is built from `start.config`: a copy of `cfg` whose model
group holds that model's architecture and whose optim is the fine-tuning one, so that
`${model.d_model}` (the noam schedule's) means the model that is built. From here on the run reads
`start.config` alone.
"""

import copy
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from lightning.pytorch.accelerators import CPUAccelerator, CUDAAccelerator
from omegaconf import DictConfig, open_dict

from transformer_mt.checkpoints.files import checkpoint_path
from transformer_mt.checkpoints.loading import read_checkpoint
from transformer_mt.config import plain
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.errors import ConfigError
from transformer_mt.tasks.runs.config_checks import machine_refusal, model_refusal
from transformer_mt.tasks.runs.finetune import fine_tuning_optim, starting_peak_lr
from transformer_mt.tasks.runs.init_from import architecture, check_architecture, read_init_from
from transformer_mt.tasks.runs.new_tokens import with_new_tokens
from transformer_mt.tasks.runs.resume import check_resume
from transformer_mt.validate import refuse

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UpdatePlan:
    """How an optimizer step sees `tokens_per_update` padded tokens (per side): `processes` (devices x
    nodes) each take `accumulation` batches of at most `batch_tokens`."""

    processes: int
    accumulation: int
    batch_tokens: int


@dataclass(frozen=True)
class Start:
    """What a training run starts from, settled before any part of it is built."""

    config: DictConfig  # the run's config, its model group as built (model.init_from's architecture)
    vocabularies: Vocabularies | None  # a checkpoint's or model.init_from's; None: made from data.tokenizer
    weights: dict[str, torch.Tensor] | None  # model.init_from's; None: random, or the resumed checkpoint's
    resume: Path | None = None  # the checkpoint training resumes from
    checkpoint: dict | None = None  # that checkpoint, read once (checkpoints.loading.read_checkpoint)
    plan: UpdatePlan | None = None  # with tokens_per_update

    @property
    def architecture(self) -> dict:
        """The Transformer's keys of the model that is built (but the vocabulary sizes)."""
        return architecture(self.config.model)

    @property
    def resumed_data(self) -> dict | None:
        """What the resumed checkpoint was trained on (its data record)."""
        return self.checkpoint["hyper_parameters"].get("data") if self.checkpoint else None


def checked_start(cfg: DictConfig) -> Start:
    """Every check of a training run that needs no data, in one place, then what it starts from:
    the config's values, the start (a model to fine-tune, a checkpoint to resume and whether it can
    be), the model, the layers and lengths the callbacks and the data ask of it, and the update plan."""
    refuse(machine_refusal(cfg))
    start = settle(cfg)
    config = start.config
    refuse(model_refusal(config, start.architecture))
    if start.checkpoint is not None:
        check_resume(config, start.checkpoint, start.resume)
    devices, nodes = processes(config.trainer)
    warn_more_processes_than_cores(config.trainer, devices)
    return Start(config, start.vocabularies, start.weights, start.resume, start.checkpoint,
                 update_plan(config, devices, nodes))


def settle(cfg: DictConfig) -> Start:
    """Read what the run starts from (a model to fine-tune, a checkpoint to resume, read once). (The
    model's keys were checked by the schema when the config was composed.)"""
    config, vocabularies, weights = cfg, None, None
    if cfg.model.get("init_from"):  # fine-tune a model: its architecture, vocabulary and weights
        source, weights, vocabularies = read_init_from(Path(cfg.model.init_from))
        vocabularies, weights = with_new_tokens(vocabularies, weights, list(cfg.model.get("new_tokens") or []))
        check_architecture(cfg.model, source, Path(cfg.model.init_from))
        log.info("model.init_from=%s: its architecture (%s), its weights (%d tensors) and its tokenizer (%s)",
                 cfg.model.init_from, ", ".join(f"{k}={v}" for k, v in source.items()), len(weights),
                 "a joint vocabulary" if vocabularies.joint else "separate vocabularies")
        config = fine_tuning_optim(with_model(cfg, source), starting_peak_lr(Path(cfg.model.init_from)))
    if not cfg.get("ckpt_path"):
        return Start(config, vocabularies, weights)
    path = checkpoint_path(cfg)  # resume: the checkpoint's vocabularies and weights, not new ones
    checkpoint = read_checkpoint(path)
    tokenizer = checkpoint["hyper_parameters"].get("tokenizer")
    return Start(config, Vocabularies.from_dict(tokenizer) if tokenizer else None, None, path, checkpoint)


def with_model(cfg: DictConfig, keys: dict) -> DictConfig:
    """A copy of `cfg` whose model group has `keys` (the dropouts and init_from stay); `cfg` itself
    is not changed."""
    config = copy.deepcopy(cfg)
    with open_dict(config):
        config.model.update(keys)
    return config


def processes(trainer: DictConfig) -> tuple[int, int]:
    """(devices, nodes): the training processes a node starts and the nodes, as Lightning's own
    accelerators parse trainer.devices (an int, a list, "0,1", -1 or "auto") for trainer.accelerator."""
    accelerator, devices = str(trainer.get("accelerator", "auto")), plain(trainer.get("devices", "auto"))
    gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and CUDAAccelerator.is_available())
    kind = CUDAAccelerator if gpu else CPUAccelerator
    try:
        parsed = kind.parse_devices(kind.auto_device_count() if devices == "auto" else devices)
    except Exception as err:  # Lightning's MisconfigurationException: its message names the value
        raise ConfigError(f"trainer.devices={devices}: {str(err).strip().splitlines()[0]}") from None
    count = len(parsed) if isinstance(parsed, list) else int(parsed or 0)
    return max(count, 1), int(trainer.get("num_nodes", 1) or 1)


def warn_more_processes_than_cores(trainer: DictConfig, devices: int) -> None:
    """One warning line when a CPU run starts more processes on this machine than it has cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    on_cpu = str(trainer.get("accelerator", "auto")) == "cpu" or not CUDAAccelerator.is_available()
    if on_cpu and devices > cores and int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0"))) == 0:
        log.warning("trainer.devices=%d starts %d training processes on %d CPU cores: they compete for the cores "
                    "and every step will crawl (use trainer.devices=%d or fewer)", devices, devices, cores, cores)


def update_plan(cfg: DictConfig, devices: int, nodes: int) -> UpdatePlan | None:
    """With `tokens_per_update` T: accumulation A = ceil(T / (processes x data.max_tokens)) batches
    of T / (processes x A) tokens each (data.max_tokens is then the most a device takes), the
    processes as Lightning counts them (`processes`); None without."""
    tokens = cfg.get("tokens_per_update")
    if tokens is None:
        return None
    # (tokens_per_update and trainer.accumulate_grad_batches: checked together by the schema, between_groups.py)
    accumulation = max(1, math.ceil(tokens / (devices * nodes * cfg.data.max_tokens)))
    plan = UpdatePlan(devices * nodes, accumulation, math.ceil(tokens / (devices * nodes * accumulation)))
    log.info("tokens_per_update=%d: %d device(s) x %d node(s) x %d tokens per batch x accumulation %d = %d padded "
             "tokens per optimizer step", tokens, devices, nodes, plan.batch_tokens, accumulation,
             plan.processes * plan.batch_tokens * accumulation)
    return plan
