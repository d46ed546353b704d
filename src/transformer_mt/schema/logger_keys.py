"""The `logger` group (conf/logger/*.yaml): Lightning's loggers by name (csv, tensorboard, wandb; many:
all three), one node each, which each option's YAML extends (`/schema_logger_NAME@NAME`). A logger's
other arguments (wandb.init's `entity`, ...) are added with `+` (`+logger.wandb.entity=TEAM`)."""

from dataclasses import dataclass
from typing import Any

from transformer_mt.schema.keys import Group, key
from transformer_mt.validate import BOOLEAN, one_of, text

FOLDER = ("${paths.output_dir}", "the folder the logger writes under (the run's)", (text, "a path"))


@dataclass
class CsvNode(Group):
    """logger=csv (the default): metrics.csv under csv/ in the run folder."""

    _target_: Any = key("lightning.pytorch.loggers.CSVLogger", "the logger's class")
    save_dir: Any = key(*FOLDER)
    name: Any = key("csv", "its subfolder", (text, "a folder name"))
    version: Any = key("", "a subfolder below that (empty: none)")


@dataclass
class TensorBoardNode(CsvNode):
    """logger=tensorboard: TensorBoard event files under tensorboard/ in the run folder (csv's keys, and one)."""

    _target_: Any = key("lightning.pytorch.loggers.TensorBoardLogger", "the logger's class")
    name: Any = key("tensorboard", "its subfolder", (text, "a folder name"))
    default_hp_metric: Any = key(False, "TensorBoard's placeholder hp_metric", BOOLEAN)


@dataclass
class WandbNode(Group):
    """logger=wandb: Weights & Biases, offline by default (runs sync later with `wandb sync`;
    logger.wandb.offline=false streams)."""

    _target_: Any = key("lightning.pytorch.loggers.WandbLogger", "the logger's class")
    save_dir: Any = key(*FOLDER)
    project: Any = key("transformer-mt", "the wandb project", (text, "a project name"))
    name: Any = key("${hydra:job.override_dirname}", "the run's name: its command-line overrides as Hydra writes "
                                                    "them (the run folder's name where there are none)")
    group: Any = key(None, "the run's group (null: the sweep, or the experiment preset)", nullable=True)
    tags: Any = key("${tags}", "the run's tags (the top-level tags)")
    offline: Any = key(True, "true: written locally, synced later with `wandb sync`; false: streamed", BOOLEAN)
    log_model: Any = key(False, "checkpoints as wandb artifacts: false | true (at the end) | all (each save)",
                         (one_of(False, True, "all"), "false, true or all"))


LOGGERS = {"csv": CsvNode, "tensorboard": TensorBoardNode, "wandb": WandbNode}
