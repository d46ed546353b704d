"""A stage's run config, derived from the pipeline's composed config: the same config as a
training run (the task=train node of the schema, with the pipeline's task options for it) in the
stage's folder, with the stage's own changes (its corpora, vocabularies, checkpoint). What a stage
trains (`training_shape`) is read from that config, so a value set by a preset or on the command
line is the same input."""

import copy
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from transformer_mt.config import plain
from transformer_mt.schema.keys import described
from transformer_mt.schema.shared import Trained
from transformer_mt.tasks.options.one_model import TrainTask

# the parts of the config that say what a stage trains: another value redoes the stage
SHAPING = ("data", "model", "optim", "module", "seed", "tokens_per_update")
# keys of those parts that say how a stage runs or is tested, not what it trains: another value
# reaches its resume, as the trainer's budget, callbacks and loggers do (tasks/runs/resume.py)
RUNNING = {"data": ("num_workers", "num_proc", "cache_dir", "run_dir", "progress", "split"),
           "module": ("compile", "decoding", "val_decoding", "quantize")}
# the pipeline's task options that its training stages take as their task=train options (the
# pipelines' schemas inherit them from task=train's)
TRAINING_TASK_KEYS = tuple(each.name for each in described(Trained))
# the trainer's keys that say how long a stage trains: another value trains a finished stage on (stages.py)
BUDGET = ("max_steps", "max_epochs", "max_time")


def training_shape(cfg: DictConfig) -> dict:
    """What the pipeline's training stages train, as its config says (resolved): a stage's input."""
    shape = {}
    for part in SHAPING:
        value = plain(cfg.get(part))
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in RUNNING.get(part, ())}
        shape[part] = value
    return shape


def training_budget(cfg: DictConfig) -> dict:
    """How long the pipeline's training stages train, as its config says: a training stage's budget."""
    return {key: plain(cfg.trainer.get(key)) for key in BUDGET}


def stage_config(cfg: DictConfig, output_dir: str, changes: dict[str, Any], ckpt_path: str | None = None
                 ) -> DictConfig:
    """The pipeline's config `cfg` (a copy) as a training run in `output_dir`: the task=train node
    with the pipeline's options for it, `changes` (dotted keys: a value replaces what is there, a
    node included), resumed from `ckpt_path` when given."""
    config = copy.deepcopy(cfg)
    with open_dict(config):
        config.task = OmegaConf.structured(TrainTask)
        for key in TRAINING_TASK_KEYS:
            config.task[key] = cfg.task[key]
        config.ckpt_path = ckpt_path
        config.paths.output_dir = output_dir
        for key, value in changes.items():
            OmegaConf.update(config, key, value, merge=False, force_add=True)
    return config
