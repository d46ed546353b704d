"""The learning rate of a fine-tuning run (model.init_from).

A fine-tuning run starts from a trained model, whose weights a schedule made for training from
scratch would shake apart: the paper's noam with a short warm-up peaks several times higher than the
model was trained at. So the default `optim=auto` (conf/optim/auto.yaml) runs noam from scratch and,
with model.init_from, its `finetune` keys (optim=finetune's): inverse_sqrt after a short warm-up,
peaking at a fraction of the starting model's peak; `optim=finetune` picks them for any run. Any
other optim keeps its schedule, and the log says its peak against the starting model's.
"""

import copy
import logging
from pathlib import Path

from omegaconf import DictConfig, open_dict

from transformer_mt.config import plain

log = logging.getLogger(__name__)


def peak_lr(optimizer: dict | None, scheduler: dict | None) -> float | None:
    """The highest learning rate of an optimizer / scheduler config pair (noam: lr x d_model^-0.5 x
    warmup^-0.5 at the warm-up's end; inverse_sqrt or none: lr); None when it cannot be told."""
    lr = (optimizer or {}).get("lr")
    if not isinstance(lr, int | float):
        return None
    target = str((scheduler or {}).get("_target_", ""))
    if target.endswith(".noam"):
        return lr * scheduler["d_model"] ** -0.5 * scheduler["warmup_steps"] ** -0.5
    return float(lr) if not scheduler or target.endswith(".inverse_sqrt") else None


def fine_tuning_optim(cfg: DictConfig, start_peak: float | None) -> DictConfig:
    """`cfg` (a copy) with the optim a fine-tuning run uses (see the module): optim=auto's `finetune`
    keys, or optim=finetune's, their lr derived from `start_peak` where they leave it null. Another
    optim: `cfg` itself, its peak said against the starting model's."""
    if cfg.optim.get("finetune") is not None:
        preset, name = cfg.optim.finetune, "optim=auto with model.init_from: optim.finetune"
    elif cfg.optim.get("peak_fraction") is not None:
        preset, name = cfg.optim, "optim=finetune"
    else:
        say_peak(cfg, start_peak)
        return cfg
    lr = preset.optimizer.lr
    if lr is None:
        lr = preset.peak_fraction * start_peak if start_peak else preset.marian_peak
    config = copy.deepcopy(cfg)
    with open_dict(config):
        config.optim = copy.deepcopy(preset)
        config.optim.optimizer.lr = float(lr)
    where = (f"{preset.peak_fraction} x the {start_peak:.3g} the starting model peaked at" if start_peak
             else "marian_peak: an imported model records no schedule")
    log.info("%s: inverse_sqrt peaking at lr %.3g (%s) after %d warm-up steps", name, lr, where,
             preset.scheduler.warmup_steps)
    return config


def say_peak(cfg: DictConfig, start_peak: float | None) -> None:
    """The peak of the run's own schedule against the starting model's, a warning where it is higher."""
    peak = peak_lr(plain(cfg.optim.optimizer), plain(cfg.optim.get("scheduler")))
    if peak is not None and start_peak:
        higher = ("; fine-tuning that high can undo what it learned (optim=auto, the default, fine-tunes with "
                  "optim=finetune's schedule)")
        log.warning("model.init_from: the schedule peaks at lr %.3g, %.1f x the %.3g the starting model peaked at%s",
                    peak, peak / start_peak, start_peak, higher if peak > start_peak else "")


def starting_peak_lr(path: Path) -> float | None:
    """The peak learning rate the model of model.init_from was trained at (None: a Marian folder,
    or a schedule peak_lr cannot tell)."""
    from transformer_mt.checkpoints.loading import read_checkpoint
    from transformer_mt.tasks.runs.init_from import run_checkpoint

    if (path / "config.json").is_file():
        return None
    hyper = read_checkpoint(run_checkpoint(path) if path.is_dir() else path, key="model.init_from")["hyper_parameters"]
    return peak_lr(hyper.get("optimizer"), hyper.get("scheduler"))
