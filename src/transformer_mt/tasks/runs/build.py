"""The build step of a training run: first settle what it starts from, then build each part once.

    trainer = build_trainer(cfg)                             # loggers, callbacks
    start = settle(cfg)                                      # architecture, vocabularies, weights
    datamodule = build_datamodule(start)
    module = build_module(start, datamodule)

A run starts from nothing (random weights, vocabularies trained on its data or read from the
cache or `data.tokenizer.file`), from a model to fine-tune (`model.init_from`: one of our
checkpoints or runs, or a Marian folder: its architecture, vocabulary and weights; see
tasks/runs/init_from.py) or from a checkpoint it resumes (`ckpt_path`: its vocabularies; its
weights, optimizer and position are restored by `trainer.fit(ckpt_path=...)`). Each part is
constructed once with everything it needs; nothing is assigned to, re-set on or loaded into it
afterwards, and `cfg` is never changed.

`cfg.model` is the one group that is no constructor call: it says which model to build (the
Transformer's keys, `TransformerConfig` without the vocabulary sizes) and `init_from`, where its
weights start. The build step turns it into the module's `model` argument. With `init_from`, the
run is built from `start.config`: a copy of `cfg` whose model group holds that model's
architecture, so that `${model.d_model}` (the noam schedule's) means the model that is built.
"""

import copy
import logging
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Protocol

import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict

from transformer_mt.checkpoints.loading import checkpoint_path, checkpoint_tokenizer, describe_corpus, read_checkpoint
from transformer_mt.config import plain
from transformer_mt.data.datamodule import TranslationDataModule
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.errors import ConfigError, DataError, find_user_error
from transformer_mt.model import TransformerConfig
from transformer_mt.tasks.runs.config_checks import check_model
from transformer_mt.tasks.runs.finetune import fine_tuning_optim, starting_peak_lr
from transformer_mt.tasks.runs.init_from import check_architecture, read_init_from
from transformer_mt.tasks.runs.wandb_online import start_online
from transformer_mt.training import TranslationModule
from transformer_mt.validate import check, integer, number

log = logging.getLogger(__name__)

RUN_SPECIFIC_DATA_KEYS = ("cache_dir", "run_dir")  # not part of what the data was


def build_trainer(cfg: DictConfig, with_logger: bool = True, with_callbacks: bool = True, **derived) -> L.Trainer:
    """The Trainer of `cfg.trainer` with the loggers of `cfg.logger`, the callbacks of `cfg.callbacks`
    and what the run derives (`derived`, e.g. accumulate_grad_batches); a value the Trainer rejects
    is reported as a config error naming `trainer`. An online wandb logger starts its run here
    (wandb_online.py: no network or no API key is a config error at once)."""
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c] if with_callbacks else []
    loggers = {key: instantiate(lg, **wandb_names(cfg, lg)) for key, lg in (cfg.get("logger") or {}).items()
               if lg and with_logger}
    for key, logger in loggers.items():
        if not cfg.logger[key].get("offline", False):
            start_online(logger, key)
    try:
        return instantiate(cfg.trainer, callbacks=callbacks, logger=list(loggers.values()) if with_logger else False,
                           **derived)
    except Exception as err:
        if find_user_error(err) is not None:
            raise
        cause = err
        while cause.__cause__ is not None:
            cause = cause.__cause__
        message = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        raise ConfigError(f"trainer: {message}") from err


def wandb_names(cfg: DictConfig, logger: DictConfig) -> dict[str, str]:
    """A wandb run's name where its config leaves it empty (its run directory's name), and its group
    where its config leaves it null: the sweep (experiment preset and multirun directory) or, for a
    single run, the experiment preset."""
    if not str(logger.get("_target_", "")).endswith("WandbLogger"):
        return {}
    names = {"name": Path(cfg.paths.output_dir).name} if not logger.get("name") else {}
    if logger.get("group") is None and HydraConfig.initialized():
        hydra = HydraConfig.get()
        experiment = hydra.runtime.choices.get("experiment")
        group = experiment
        if hydra.mode == RunMode.MULTIRUN:
            group = "/".join(part for part in (experiment, Path(hydra.sweep.dir).name) if part)
        if group:
            names["group"] = group
    return names


@dataclass(frozen=True)
class Start:
    """What a training run starts from, settled before any part of it is built."""

    config: DictConfig  # the run's config, its model group as built (model.init_from's architecture)
    vocabularies: Vocabularies | None  # a checkpoint's or model.init_from's; None: made from data.tokenizer
    weights: dict[str, torch.Tensor] | None  # model.init_from's; None: random, or the resumed checkpoint's
    resume: Path | None  # the checkpoint training resumes from
    resumed_data: dict | None  # what that checkpoint was trained on (its data record)

    @property
    def architecture(self) -> dict:
        """The Transformer's keys of the model that is built (but the vocabulary sizes)."""
        return architecture(self.config.model)


def architecture(model: DictConfig | dict) -> dict:
    """The Transformer's keys of a model config (conf/model): all but `init_from`, which says where
    the weights come from, not what the model is."""
    return {key: value for key, value in plain(model).items() if key != "init_from"}


def settle(cfg: DictConfig) -> Start:
    """Read what the run starts from (a model to fine-tune, a checkpoint to resume) and check that the
    model can be built, before any data work."""
    config, vocabularies, weights = cfg, None, None
    if cfg.model.get("init_from"):  # fine-tune a model: its architecture, vocabulary and weights
        source, weights, vocabularies = read_init_from(Path(cfg.model.init_from))
        check_architecture(cfg.model, source, Path(cfg.model.init_from))
        log.info("model.init_from=%s: its architecture (%s), its weights (%d tensors) and its tokenizer (%s)",
                 cfg.model.init_from, ", ".join(f"{k}={v}" for k, v in source.items()), len(weights),
                 "a joint vocabulary" if vocabularies.joint else "separate vocabularies")
        config = fine_tuning_optim(with_model(cfg, source), starting_peak_lr(Path(cfg.model.init_from)))
    else:  # null is optim=finetune's, derived only with model.init_from
        check("optim.optimizer.lr", cfg.optim.optimizer.get("lr"), number(0.0, low_open=True),
              "a number > 0 (null is optim=finetune's, with model.init_from: a fraction of the starting model's peak)")
    check_model(architecture(config.model))
    if not cfg.get("ckpt_path"):
        return Start(config, vocabularies, weights, None, None)
    path = checkpoint_path(cfg)  # resume: the checkpoint's vocabularies and weights, not new ones
    checkpoint = read_checkpoint(path)
    check_resumable(path, checkpoint, architecture(config.model))
    return Start(config, Vocabularies.from_dict(checkpoint_tokenizer(checkpoint)), None, path,
                 checkpoint["hyper_parameters"].get("data"))


def with_model(cfg: DictConfig, keys: dict) -> DictConfig:
    """A copy of `cfg` whose model group has `keys` (the dropouts and init_from stay); `cfg` itself
    is not changed."""
    config = copy.deepcopy(cfg)
    with open_dict(config):
        config.model.update(keys)
    return config


def check_resumable(path: Path, checkpoint: dict, arch: dict) -> None:
    """Resuming needs a full checkpoint of the same model."""
    if "optimizer_states" not in checkpoint or "loops" not in checkpoint:
        raise ConfigError(f"ckpt_path={path}: a weights-only checkpoint (no optimizer state, no training "
                          "position); it can be evaluated, translated or averaged, not resumed: resume from "
                          "checkpoints/last.ckpt")
    defaults = {f.name: f.default for f in fields(TransformerConfig)}
    saved = {**defaults, **checkpoint["hyper_parameters"]["model"]}  # keys added since it was written: defaults
    current = {**defaults, **arch}
    for key in sorted(set(saved) | set(current)):
        if saved.get(key) != current.get(key):
            raise ConfigError(f"model.{key}={current.get(key)}, but ckpt_path={path} was trained with "
                              f"model.{key}={saved.get(key)}: resume with the checkpoint's model settings")


@dataclass(frozen=True)
class UpdatePlan:
    """How an optimizer step sees `tokens_per_update` padded tokens (per side): `processes` (devices x
    nodes) each take `accumulation` batches of at most `batch_tokens`."""

    processes: int
    accumulation: int
    batch_tokens: int


class Placement(Protocol):
    """Where a Trainer runs, as Lightning counts it (an L.Trainer is one)."""

    num_devices: int  # processes per node
    num_nodes: int


def placement(cfg: DictConfig) -> L.Trainer | None:
    """With `tokens_per_update`: a Trainer of cfg.trainer without loggers or callbacks, built
    quietly, so that the update plan reads Lightning's own count of devices and nodes (`devices`
    as an int, a list, "0,1", -1 or "auto"); None without (no plan to make)."""
    if cfg.get("tokens_per_update") is None:
        return None
    quiet = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    level = quiet.level
    quiet.setLevel(logging.WARNING)  # its "GPU available" lines come once, from the run's own trainer
    try:
        return build_trainer(cfg, with_logger=False, with_callbacks=False)
    finally:
        quiet.setLevel(level)


def update_plan(cfg: DictConfig, where: Placement | None) -> UpdatePlan | None:
    """With `tokens_per_update` T: accumulation A = ceil(T / (processes x data.max_tokens)) batches
    of T / (processes x A) tokens each (data.max_tokens is then the most a device takes), the
    processes counted by Lightning (`where`: a built Trainer); None without."""
    tokens = cfg.get("tokens_per_update")
    if tokens is None:
        return None
    check("tokens_per_update", tokens, integer(1), "an integer >= 1 or null")
    if cfg.trainer.get("accumulate_grad_batches", 1) != 1:
        raise ConfigError(f"tokens_per_update={tokens} sets the gradient accumulation: leave "
                          f"trainer.accumulate_grad_batches at 1 (it is {cfg.trainer.accumulate_grad_batches})")
    devices, nodes = where.num_devices, where.num_nodes
    accumulation = max(1, math.ceil(tokens / (devices * nodes * cfg.data.max_tokens)))
    plan = UpdatePlan(devices * nodes, accumulation, math.ceil(tokens / (devices * nodes * accumulation)))
    log.info("tokens_per_update=%d: %d device(s) x %d node(s) x %d tokens per batch x accumulation %d = %d padded "
             "tokens per optimizer step", tokens, devices, nodes, plan.batch_tokens, accumulation,
             plan.processes * plan.batch_tokens * accumulation)
    return plan


def build_datamodule(start: Start, plan: UpdatePlan | None = None) -> TranslationDataModule:
    """The data config, with the vocabularies the run starts from (None: the datamodule makes them)
    and, with an update plan, its batch budget."""
    derived = {"max_tokens": plan.batch_tokens} if plan else {}
    return instantiate(start.config.data, vocabularies=start.vocabularies, **derived)


def data_record(data: DictConfig, fingerprints: dict) -> dict:
    """What a checkpoint keeps of the data it was trained on."""
    config = {k: v for k, v in plain(data).items() if k not in RUN_SPECIFIC_DATA_KEYS}
    return {"config": config, "fingerprints": fingerprints}


def check_same_data(start: Start, fingerprints: dict) -> None:
    """A resumed run trains on the training data of its checkpoint; another batch size is warned about
    (the batches, and so their order, are not those the uninterrupted run would have had)."""
    record = start.resumed_data
    if not record:
        return
    if record["fingerprints"].get("train") != fingerprints.get("train"):
        raise DataError(f"ckpt_path={start.resume} was trained on other data ({describe_corpus(record['config'])}), "
                        f"not on {describe_corpus(plain(start.config.data))}: resume with the data options of that "
                        "run (its config.yaml)")
    old, new = record["config"].get("max_tokens"), start.config.data.get("max_tokens")
    if old is not None and old != new:
        log.warning("data.max_tokens %s -> %s: ckpt_path=%s was trained with data.max_tokens=%s, so the batches are "
                    "cut and ordered differently from here on (and a mid-epoch resume skips or repeats some pairs of "
                    "that epoch)", old, new, start.resume, old)


def build_module(start: Start, datamodule: TranslationDataModule) -> TranslationModule:
    """cfg.module, plus what the build step settled: the architecture, the vocabularies (which say
    the vocabulary sizes and special ids), the data record and the initial weights."""
    vocab, fingerprints = datamodule.vocabularies, datamodule.fingerprints()
    make = instantiate(start.config.module, _partial_=True, _recursive_=False)
    return make(model=start.architecture, tokenizer=vocab.to_dict(),
                data=data_record(start.config.data, fingerprints), initial_weights=start.weights)
