"""task=train: fit with validation BLEU, keep the best checkpoint, test it, write metrics.json.

Before any data work the config is checked (tasks/runs/config_checks.py), the Trainer is built and what the
run starts from is settled (tasks/runs/build.py), so a wrong key, a missing GPU, an impossible
precision or a checkpoint that cannot be resumed stops the run at once. Every split the run will
read is then prepared and checked, so a bad test sentence stops it before training, not after.
SIGTERM or Ctrl-C stop training after the running batch, with checkpoints/last.ckpt written and one
line saying what to resume from (exit status 143 or 130).
"""

import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import NoReturn

import lightning as L
from lightning.pytorch.accelerators import CPUAccelerator
from lightning.pytorch.callbacks import ModelCheckpoint, Timer
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf

from transformer_mt.checkpoints.averaging import epoch_checkpoints, write_average
from transformer_mt.checkpoints.loading import read_checkpoint
from transformer_mt.config import plain
from transformer_mt.errors import ConfigError
from transformer_mt.tasks.runs.build import (
    build_datamodule,
    build_module,
    build_trainer,
    check_same_data,
    placement,
    settle,
    update_plan,
)
from transformer_mt.tasks.runs.config_checks import (
    check_config,
    check_corpus_named,
    check_dashboard_layer,
    check_max_len,
    check_packed,
)
from transformer_mt.tasks.runs.outputs import named_sets, print_summary, tokenized_bleu_extra, write_results
from transformer_mt.tasks.runs.resume import check_resume
from transformer_mt.training import TranslationModule
from transformer_mt.training.last_checkpoint import (
    CTRL_C_EXIT_STATUS,
    SIGTERM_EXIT_STATUS,
    CtrlC,
    LastCheckpoint,
    ctrl_c_stops,
    exit_status,
    resume_hint,
)
from transformer_mt.training.step_meter import StepMeter
from transformer_mt.validate import check, integer

log = logging.getLogger(__name__)

def run(cfg: DictConfig) -> dict:
    with ctrl_c_stops():
        try:
            return train(cfg)
        except CtrlC:  # while the run was being built: nothing to save yet
            print("stopped by Ctrl-C before training started", file=sys.stderr)
            sys.exit(CTRL_C_EXIT_STATUS)


def train(cfg: DictConfig) -> dict:
    check_config(cfg, ("seed", "module", "optim", "trainer"))
    check_corpus_named(cfg)
    check_packed(cfg)
    check_averaging(cfg)
    if cfg.get("ckpt_path"):
        keep_earlier_curves(Path(cfg.paths.output_dir))
    plan = update_plan(cfg, placement(cfg))  # devices and nodes as Lightning counts them
    trainer = build_trainer(cfg, **({"accumulate_grad_batches": plan.accumulation} if plan else {}))
    warn_more_processes_than_cores(trainer)
    L.seed_everything(cfg.seed, workers=True)
    start = settle(cfg)
    if start.resume is not None:
        check_resume(start.config, read_checkpoint(start.resume), start.resume, trainer)
    check_dashboard_layer(cfg, start.architecture)
    check_max_len(start.config.data, start.architecture)
    datamodule = build_datamodule(start, plan)
    check_same_data(start, datamodule.fingerprints())
    datamodule.check_splits(["train", "val", cfg.data.split], start.architecture.get("max_positions"))
    module = build_module(start, datamodule)
    say_the_sets(cfg, datamodule)
    log_config(trainer, start.config, module, datamodule.mixture.composition())  # check_splits made it
    try:
        started = time.perf_counter()
        fit(trainer, module, datamodule, start.resume)
        train_seconds = training_time(trainer, time.perf_counter() - started)
        meter = next((c for c in trainer.callbacks if isinstance(c, StepMeter)), None)
        tokens_per_sec = meter.tokens_per_sec() if meter else None
        best = best_checkpoint(trainer)
        tested = average_at_end(cfg, trainer) or (best.best_model_path if best else None)
        trainer.test(module, datamodule=datamodule, ckpt_path=tested, weights_only=True if tested else None,
                     verbose=False)
    except SIGTERMException:
        stopped(trainer, "SIGTERM", SIGTERM_EXIT_STATUS)
    except CtrlC:
        stopped(trainer, "Ctrl-C", CTRL_C_EXIT_STATUS)
    finally:
        finish_wandb()
    if not trainer.is_global_zero:
        return {}
    extra = run_record(trainer, module, datamodule, best, tested, tokens_per_sec, train_seconds)
    results = module.results["test"]
    sets = named_sets(module.results, "test")
    if cfg.task.get("tokenized_bleu"):
        extra.update(tokenized_bleu_extra("test", results.rows, cfg.task.tokenized_bleu, sets))
    metrics = write_results(Path(cfg.paths.output_dir), "test", results, extra, sets)
    print_summary(f"test ({cfg.data.split} split)", metrics, results.rows)
    return metrics


def say_the_sets(cfg: DictConfig, datamodule) -> None:
    """With several validation or test sets (data.corpora), one line naming each set's metric and
    the one checkpoints are selected on."""
    names = {split: datamodule.eval_sets(split) for split in dict.fromkeys(["val", cfg.data.split])}
    if all(len(sets) == 1 for sets in names.values()):
        return
    monitor = OmegaConf.select(cfg, "callbacks.model_checkpoint.monitor", default=None)
    for split, sets in names.items():
        keys = [f"{split}/bleu ({sets[0]})", *(f"{split}/{name}/bleu" for name in sets[1:])]
        log.info("%s sets: %s%s", split, ", ".join(keys),
                 f"; checkpoints are selected on {monitor} (callbacks.model_checkpoint.monitor)"
                 if split == "val" and monitor else "")


def training_time(trainer: L.Trainer, this_process: float) -> float:
    """Seconds of training, those before a resume included: what Lightning's Timer (callbacks.timer,
    or the one trainer.max_time makes) counted and keeps in checkpoints; without a Timer, the
    seconds this process trained."""
    timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
    return timer.time_elapsed("train") if timer else this_process


def warn_more_processes_than_cores(trainer: L.Trainer) -> None:
    """One warning line when a CPU run starts more processes on this machine than it has cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if isinstance(trainer.accelerator, CPUAccelerator) and trainer.is_global_zero and trainer.num_devices > cores:
        log.warning("trainer.devices=%d starts %d training processes on %d CPU cores: they compete for the cores "
                    "and every step will crawl (use trainer.devices=%d or fewer)", trainer.num_devices,
                    trainer.num_devices, cores, cores)


def run_record(trainer: L.Trainer, module: TranslationModule, datamodule, best: ModelCheckpoint | None,
               tested: str | None, tokens_per_sec: float | None, train_seconds: float) -> dict:
    """What metrics.json says of the run besides the test scores: the last validation, the best and
    the tested checkpoint, size, speed, length, the update plan and the decoding."""
    return {
        **{k: v for key, each in module.results.items() if key.split("/")[0] == "val"  # the last validation
           for k, v in each.metrics.items()},
        "val/bleu_best": float(best.best_model_score) if best else None,
        "best_checkpoint": best.best_model_path if best else None,
        "tested_checkpoint": tested,
        "num_parameters": module.model.num_parameters(),
        "tokens_per_sec": tokens_per_sec * trainer.world_size if tokens_per_sec is not None else None,
        "train_seconds": round(train_seconds, 1),
        "epochs": trainer.current_epoch,
        "steps": trainer.global_step,
        "accumulate_grad_batches": trainer.accumulate_grad_batches,
        "batch_tokens": datamodule.max_tokens,
        "decoding": module.hparams.decoding,
        "quantize": module.quantize,
    }


def fit(trainer: L.Trainer, module: TranslationModule, datamodule: L.LightningDataModule, resume: Path | None) -> None:
    """trainer.fit, resuming from `resume` if given; Ctrl-C and SIGTERM stop it after the running
    batch, with checkpoints/last.ckpt written (training/last_checkpoint.py)."""
    with warnings.catch_warnings():  # our batch sampler resumes mid-epoch (the datamodule's state)
        warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch ended")
        trainer.fit(module, datamodule=datamodule, ckpt_path=resume)


def best_checkpoint(trainer: L.Trainer) -> ModelCheckpoint | None:
    """The checkpoint callback that kept a best checkpoint in this run (None: no validation ran)."""
    found = next((c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)), None)
    if found is None or not found.best_model_path:
        if not trainer.fast_dev_run:
            log.warning("no best checkpoint in this run (no validation ran): testing the final weights")
        return None
    return found


def stopped(trainer: L.Trainer, by: str, status: int) -> NoReturn:
    """One line saying where training stopped (by SIGTERM or Ctrl-C) and what to resume from; exit
    with `status`."""
    last = next((c.path for c in trainer.callbacks if isinstance(c, LastCheckpoint)), None)
    if trainer.is_global_zero:
        step = read_checkpoint(last)["global_step"] if last is not None and last.is_file() else None
        print(f"stopped by {by} at step {trainer.global_step}; {resume_hint(last, step)}", file=sys.stderr)
    sys.exit(exit_status(trainer, status))


def keep_earlier_curves(output_dir: Path) -> None:
    """Resumed into its own run directory, a run keeps the curves logged so far: Lightning's CSV
    logger would delete csv/metrics.csv, so it is renamed to csv/metrics.partN.csv first."""
    curves = output_dir / "csv" / "metrics.csv"
    if curves.is_file():
        part = 1 + sum(1 for _ in curves.parent.glob("metrics.part*.csv"))
        curves.rename(curves.with_name(f"metrics.part{part}.csv"))


def log_config(trainer: L.Trainer, cfg: DictConfig, module: TranslationModule, composition: dict) -> None:
    """The resolved run config (its model group as built), the parameter count, the run directory
    and what an epoch shows of each training corpus as every logger's hyper-parameters (wandb
    config, TensorBoard hparams, csv/hparams.yaml)."""
    config = {key: plain(cfg[key]) for key in cfg if key != "hydra"}
    params = {**config, "num_parameters": module.model.num_parameters(), "run_dir": str(cfg.paths.output_dir),
              "epoch_composition": composition}
    for logger in trainer.loggers:
        logger.log_hyperparams(params)


def check_averaging(cfg: DictConfig) -> None:
    """task.last_n needs the epoch checkpoints it averages: one line before any work."""
    n = cfg.task.get("last_n") or 0
    check("task.last_n", n, integer(0), "an integer >= 0 (0: no averaging)")
    if not n:
        return
    epochs = (cfg.get("callbacks") or {}).get("epoch_checkpoint")
    keep = epochs.get("save_top_k") if epochs else None
    if not isinstance(keep, int) or (keep != -1 and keep < n):
        raise ConfigError(f"task.last_n={n} averages the last {n} checkpoints of callbacks.epoch_checkpoint,"
                          " which must be on and keep at least that many (save_top_k: -1 or >= N)")


def average_at_end(cfg: DictConfig, trainer: L.Trainer) -> str | None:
    """With task.last_n=N: checkpoints/average.ckpt, the mean of the last N epoch
    checkpoints (fewer, with a warning, if fewer were written), written by rank 0; its path."""
    n = cfg.task.get("last_n") or 0
    if not n:
        return None
    run_dir = Path(cfg.paths.output_dir)
    output = run_dir / "checkpoints" / "average.ckpt"
    if trainer.is_global_zero:
        paths = epoch_checkpoints(run_dir)[-n:]
        if not paths:
            raise ConfigError(f"task.last_n={n}: no epoch checkpoints in {run_dir}/checkpoints/epochs")
        if len(paths) < n:
            log.warning("task.last_n=%d, but the run wrote %d epoch checkpoints: averaging those", n,
                        len(paths))
        write_average(paths, output, cfg.get("progress"))
    trainer.strategy.barrier()
    return str(output)


def finish_wandb() -> None:
    """Close a wandb run if one was started (logger=wandb), also when training failed. A run that
    started one imported wandb: the others do not pay its import (about 2 s)."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish()
