"""The learning rate of a fine-tuning run (model.init_from).

A fine-tuning run starts from a trained model, whose weights a schedule made for training from
scratch would shake apart: the paper's noam with a short warm-up peaks several times higher than the
model was trained at. So a model.init_from run that picks no optim itself runs with `optim=finetune`
(conf/optim/finetune.yaml): inverse_sqrt after a short warm-up, peaking at a fraction of the
starting model's peak. One that picks its own is told its peak against the starting model's.
"""

import copy
import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from transformer_mt.config import overridden_keys, plain

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


def picked_optim() -> bool:
    """Whether the run chose its optim: on the command line (optim=..., optim.*=...) or with an
    experiment preset (whose schedule is part of its recipe)."""
    from hydra.core.hydra_config import HydraConfig

    keys = overridden_keys()
    experiment = HydraConfig.get().runtime.choices.get("experiment") if HydraConfig.initialized() else None
    return experiment is not None or any(k == "optim" or k.startswith("optim.") for k in keys)


def fine_tuning_optim(cfg: DictConfig, start_peak: float | None) -> DictConfig:
    """`cfg` (a copy) with the optim a fine-tuning run uses (see the module); `cfg` itself is not
    changed. With an optim the run picked, `cfg` as it is, its peak said against the starting model's."""
    chose_finetune = cfg.optim.get("peak_fraction") is not None  # optim=finetune, picked or the default
    if picked_optim() and not chose_finetune:
        peak = peak_lr(plain(cfg.optim.optimizer), plain(cfg.optim.get("scheduler")))
        if peak is not None and start_peak:
            log.warning("model.init_from: the schedule peaks at lr %.3g, %.1f x the %.3g the starting model peaked "
                        "at%s", peak, peak / start_peak, start_peak, "; fine-tuning that high can undo what it learned "
                        "(without optim settings the run uses optim=finetune)" if peak > start_peak else "")
        return cfg
    preset = cfg.optim if chose_finetune else OmegaConf.load(Path(cfg.paths.root_dir) / "conf" / "optim" /
                                                             "finetune.yaml")
    lr = preset.optimizer.lr
    if lr is None:
        lr = preset.peak_fraction * start_peak if start_peak else preset.marian_peak
    config = copy.deepcopy(cfg)
    with open_dict(config):
        config.optim = copy.deepcopy(preset)
        config.optim.optimizer.lr = float(lr)
    where = (f"{preset.peak_fraction} x the {start_peak:.3g} the starting model peaked at" if start_peak
             else "optim.marian_peak: the Marian model records no schedule")
    log.info("model.init_from: optim=finetune%s: inverse_sqrt peaking at lr %.3g (%s) after %d "
             "warm-up steps", "" if chose_finetune else " (no optim picked)", lr, where, preset.scheduler.warmup_steps)
    return config


def starting_peak_lr(path: Path) -> float | None:
    """The peak learning rate the model of model.init_from was trained at (None: a Marian folder,
    or a schedule peak_lr cannot tell)."""
    from transformer_mt.checkpoints.loading import read_checkpoint
    from transformer_mt.tasks.runs.init_from import run_checkpoint

    if (path / "config.json").is_file():
        return None
    hyper = read_checkpoint(run_checkpoint(path) if path.is_dir() else path, key="model.init_from")["hyper_parameters"]
    return peak_lr(hyper.get("optimizer"), hyper.get("scheduler"))
