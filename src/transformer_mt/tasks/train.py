"""task=train: fit with validation BLEU, keep the best checkpoint, test it, write metrics.json.

Before any part is built, every check that needs no data runs and what the run starts from is
settled (tasks/runs/start.py), so a wrong key, a missing GPU, an impossible precision or a
checkpoint that cannot be resumed stops the run at once; then the parts are built
(tasks/runs/build.py). Every split the run will
read is then prepared and checked, so a bad test sentence stops it before training, not after.
SIGTERM or Ctrl-C stop training after the running batch, with checkpoints/last.ckpt written and one
line saying what to resume from (exit status 143 or 130); before training, or after it (between
fitting and testing, while testing), they stop at once, the line saying so (stops.py).
"""

import logging
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig, OmegaConf

from transformer_mt.checkpoints.averaging import epoch_checkpoints, write_average
from transformer_mt.checkpoints.loading import read_checkpoint
from transformer_mt.config import plain
from transformer_mt.errors import DataError
from transformer_mt.stops import STOPS, Terminated, say, stopped_by, stops_say
from transformer_mt.tasks.runs.build import RunCallbacks, build_datamodule, build_module, build_run_trainer
from transformer_mt.tasks.runs.outputs import named_sets, print_summary, tokenized_bleu_extra, write_results
from transformer_mt.tasks.runs.rerun import finished_metrics, own_last
from transformer_mt.tasks.runs.start import Start, checked_start
from transformer_mt.training import TranslationModule
from transformer_mt.training.last_checkpoint import LastCheckpoint, exit_status, resume_hint

log = logging.getLogger(__name__)

def run(cfg: DictConfig) -> dict:
    rerun = OmegaConf.select(cfg, "callbacks.last_checkpoint.rerun", default=None)  # a pipeline's stage
    with stops_say(lambda: "before training started" + (f"; go on with {rerun}" if rerun else "")):
        return train(cfg)


def train(cfg: DictConfig) -> dict:
    """Check, build, fit, test, as lightning-hydra-template's train does: every check that needs no
    data first (tasks/runs/start.py), then each part built once (tasks/runs/build.py), then fit and
    test; from the start on the run reads `start.config` alone. With ckpt_path=last, a finished run
    is not trained again and a stopped one resumes (tasks/runs/rerun.py)."""
    finished = finished_metrics(cfg)
    if finished is not None:
        return finished
    start = checked_start(own_last(cfg))
    config = start.config
    trainer, callbacks = build_run_trainer(start)
    L.seed_everything(config.seed, workers=True)
    datamodule = build_datamodule(start)
    module = build_module(start, datamodule)
    say_the_sets(config, datamodule)
    log_config(trainer, config, module, datamodule.mixture.composition())  # check_splits made it
    return fit_and_test(trainer, callbacks, module, datamodule, start)


@dataclass(frozen=True)
class Outcome:
    """What fitting and testing gave besides the module's results: the best checkpoint (None: no
    validation ran), the tested one, the training speed and time."""

    best: ModelCheckpoint | None
    tested: str | None
    tokens_per_sec: float | None
    train_seconds: float


def fit_and_test(trainer: L.Trainer, callbacks: RunCallbacks, module: TranslationModule, datamodule,
                 start: Start) -> dict:
    """trainer.fit (resumed from start.resume), the average of the last epochs with task.last_n,
    trainer.test of the tested checkpoint, metrics.json; SIGTERM or Ctrl-C stop the run in one line
    saying how far it got (training, or testing after it) and exit."""
    try:
        fit(trainer, module, datamodule, start.resume)
        # read before testing: loading the tested checkpoint restores its Timer, whose seconds would count twice
        seconds = callbacks.timer.time_elapsed("train")
        best = best_checkpoint(trainer, callbacks.best)
        tested = average_at_end(start.config, trainer) or (best.best_model_path if best else None)
        trainer.test(module, datamodule=datamodule, ckpt_path=tested, weights_only=True if tested else None,
                     verbose=False)
        if not trainer.is_global_zero:
            return {}
        outcome = Outcome(best, tested, callbacks.meter.tokens_per_sec(), seconds)
        return write_metrics(start.config, trainer, module, datamodule, outcome)
    except SIGTERMException:
        stopped(trainer, callbacks.last, Terminated())
    except STOPS as stop:
        stopped(trainer, callbacks.last, stop)
    finally:
        finish_wandb()


def write_metrics(config: DictConfig, trainer: L.Trainer, module: TranslationModule, datamodule,
                  outcome: Outcome) -> dict:
    """metrics.json, the test translations and the summary (rank 0)."""
    extra = run_record(trainer, module, datamodule, outcome)
    results = module.results["test"]
    sets = named_sets(module.results, "test")
    if config.task.get("tokenized_bleu"):
        extra.update(tokenized_bleu_extra("test", results.rows, config.task.tokenized_bleu, sets))
    metrics = write_results(Path(config.paths.output_dir), "test", results, extra, sets)
    print_summary(f"test ({config.data.split} split)", metrics, results.rows)
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


def run_record(trainer: L.Trainer, module: TranslationModule, datamodule, outcome: Outcome) -> dict:
    """What metrics.json says of the run besides the test scores: the last validation, the best and
    the tested checkpoint, size, speed, length, the update plan and the decoding."""
    best, speed = outcome.best, outcome.tokens_per_sec
    return {
        **{k: v for key, each in module.results.items() if key.split("/")[0] == "val"  # the last validation
           for k, v in each.metrics.items()},
        "val/bleu_best": float(best.best_model_score) if best else None,
        "best_checkpoint": best.best_model_path if best else None,
        "tested_checkpoint": outcome.tested,
        "num_parameters": module.model.num_parameters(),
        "tokens_per_sec": speed * trainer.world_size if speed is not None else None,
        "train_seconds": round(outcome.train_seconds, 1),
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


def best_checkpoint(trainer: L.Trainer, best: ModelCheckpoint) -> ModelCheckpoint | None:
    """callbacks.model_checkpoint when it kept a best checkpoint in this run (None: no validation ran)."""
    if not best.best_model_path:
        if not trainer.fast_dev_run:
            log.warning("no best checkpoint in this run (no validation ran): testing the final weights")
        return None
    return best


def stopped(trainer: L.Trainer, last: LastCheckpoint, stop: BaseException) -> NoReturn:
    """One line saying where the run stopped (by SIGTERM or Ctrl-C: training at step N, or after
    training to step N, before the test was done) and what to resume from; exit with the stop's status."""
    by, status = stopped_by(stop)
    if trainer.is_global_zero:
        step = read_checkpoint(last.path)["global_step"] if last.path.is_file() else None
        where = (f"after training to step {trainer.global_step}, before the test was done" if last.trained
                 else f"at step {trainer.global_step}")
        say(f"stopped by {by} {where}; {resume_hint(last.path, step, last.rerun)}")
    sys.exit(exit_status(trainer, status))


def log_config(trainer: L.Trainer, cfg: DictConfig, module: TranslationModule, composition: dict) -> None:
    """The resolved run config (its model group as built), the parameter count, the run directory
    and what an epoch shows of each training corpus as every logger's hyper-parameters (wandb
    config, TensorBoard hparams, csv/hparams.yaml)."""
    config = {key: plain(cfg[key]) for key in cfg if key != "hydra"}
    params = {**config, "num_parameters": module.model.num_parameters(), "run_dir": str(cfg.paths.output_dir),
              "epoch_composition": composition}
    for logger in trainer.loggers:
        logger.log_hyperparams(params)


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
            raise DataError(f"task.last_n={n}: no epoch checkpoints in {run_dir}/checkpoints/epochs")
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
