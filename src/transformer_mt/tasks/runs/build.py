"""The build step of a training run: each part built once, from what the run starts from
(tasks/runs/start.py: `checked_start`), with everything it needs.

    trainer = build_run_trainer(start)         # loggers, callbacks, the update plan's accumulation
    datamodule = build_datamodule(start)       # its data prepared (vocabularies, splits) and checked
    module = build_module(start, datamodule)   # the architecture, the vocabularies, the start's weights

Nothing is assigned to, re-set on or loaded into a part afterwards, and the config is never changed.
"""

import logging
from dataclasses import dataclass
from pathlib import Path

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from lightning.pytorch.callbacks import Callback, ModelCheckpoint, Timer
from omegaconf import DictConfig

from transformer_mt.config import plain
from transformer_mt.data.datamodule import TranslationDataModule
from transformer_mt.data.mixture import refuse_old_spelling
from transformer_mt.errors import ConfigError, find_user_error
from transformer_mt.model.kernels import for_cpu
from transformer_mt.tasks.runs.resume import check_resumed_data, say_fresh_callbacks
from transformer_mt.tasks.runs.start import Start
from transformer_mt.tasks.runs.wandb_online import start_online
from transformer_mt.training import TranslationModule
from transformer_mt.training.last_checkpoint import LastCheckpoint
from transformer_mt.training.step_meter import StepMeter

log = logging.getLogger(__name__)

RUN_SPECIFIC_DATA_KEYS = ("cache_dir", "run_dir")  # not part of what the data was


def build_trainer(cfg: DictConfig, with_logger: bool = True, callbacks: list[Callback] = (), **derived) -> L.Trainer:
    """The Trainer of `cfg.trainer` with the loggers of `cfg.logger`, `callbacks` and what the run
    derives (`derived`, e.g. accumulate_grad_batches); a value the Trainer rejects is reported as a
    config error naming `trainer`. An online wandb logger starts its run here (wandb_online.py: no
    network or no API key is a config error at once)."""
    callbacks = list(callbacks)
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


@dataclass(frozen=True)
class RunCallbacks:
    """The callbacks a training run reads after fitting (conf/callbacks_always.yaml), by their names."""

    best: ModelCheckpoint  # callbacks.model_checkpoint: best.ckpt
    last: LastCheckpoint  # callbacks.last_checkpoint: last.ckpt, the stop on Ctrl-C / SIGTERM
    meter: StepMeter  # callbacks.step_meter: tokens per second
    timer: Timer  # callbacks.timer: the training time


def build_run_trainer(start: Start) -> tuple[L.Trainer, RunCallbacks]:
    """A training run's Trainer, with every callback of its config (those it needs among them) and
    its update plan's gradient accumulation; resumed into its own run folder, the curves logged so
    far kept (Lightning's CSV logger would delete csv/metrics.csv), and a callback the checkpoint
    has no state for said."""
    config = start.config
    if start.resume is not None:
        keep_earlier_curves(Path(config.paths.output_dir))
    callbacks = {name: instantiate(node) for name, node in (config.get("callbacks") or {}).items() if node}
    plan = start.plan
    trainer = build_trainer(config, callbacks=list(callbacks.values()),
                            **({"accumulate_grad_batches": plan.accumulation} if plan else {}))
    if start.checkpoint is not None:
        say_fresh_callbacks(trainer.callbacks, start.checkpoint, start.resume)
    return trainer, RunCallbacks(callbacks["model_checkpoint"], callbacks["last_checkpoint"], callbacks["step_meter"],
                                 callbacks["timer"])


def keep_earlier_curves(output_dir: Path) -> None:
    """csv/metrics.csv renamed to csv/metrics.partN.csv (N: the next part), where there is one."""
    curves = output_dir / "csv" / "metrics.csv"
    if curves.is_file():
        part = 1 + sum(1 for _ in curves.parent.glob("metrics.part*.csv"))
        curves.rename(curves.with_name(f"metrics.part{part}.csv"))


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


def build_datamodule(start: Start) -> TranslationDataModule:
    """The data config (a data config that still names `data.corpus` refused in one line), with the
    vocabularies the run starts from (None: the datamodule makes them) and, with an update plan, its
    batch budget; then its data prepared (the vocabularies made or found, every split encoded into
    the cache and read: prepare_data, setup) and checked: a resume's training data against its
    checkpoint's, every split the run reads against the batch budget and the model, so that a bad
    test sentence stops the run before training, not after."""
    config = start.config
    refuse_old_spelling(config.data)
    derived = {"max_tokens": start.plan.batch_tokens} if start.plan else {}
    datamodule = instantiate(config.data, vocabularies=start.vocabularies, **derived)
    datamodule.prepare_data()
    datamodule.setup()
    if start.checkpoint is not None:
        check_resumed_data(start.checkpoint, start.resume, config.data, datamodule.fingerprints())
    datamodule.check_splits(["train", "val", config.data.split], start.architecture.get("max_positions"))
    return datamodule


def data_record(data: DictConfig, fingerprints: dict) -> dict:
    """What a checkpoint keeps of the data it was trained on."""
    config = {k: v for k, v in plain(data).items() if k not in RUN_SPECIFIC_DATA_KEYS}
    return {"config": config, "fingerprints": fingerprints}


def build_module(start: Start, datamodule: TranslationDataModule) -> TranslationModule:
    """cfg.module, plus what the build step settled: the architecture, the vocabularies (which say
    the vocabulary sizes and special ids), the data record, the initial weights and the kernels
    decoding runs on (the key `kernels`)."""
    vocab, fingerprints = datamodule.vocabularies(), datamodule.fingerprints()
    make = instantiate(start.config.module, _partial_=True, _recursive_=False)
    return make(model=start.architecture, tokenizer=vocab.to_dict(),
                data=data_record(start.config.data, fingerprints), initial_weights=start.weights,
                kernels=for_cpu(start.config.kernels))
