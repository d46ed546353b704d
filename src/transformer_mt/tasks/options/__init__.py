"""The task group's options: one schema class per task (`task=NAME`), torch-free, whose docstring is
the task's usage, whose fields are its keys `task.KEY` (each declared once with default, rule and
description: schema/keys.py), whose class attributes declare the paths it reads and writes
(schema/task_base.py) and whose `runner` is the task's run function (its module in tasks/, imported
when the task runs, after every check). Adding a task is one class here and one module there."""

from hydra.core.config_store import ConfigStore

from transformer_mt.schema.store import register_groups
from transformer_mt.tasks.options.multistage import BacktranslateTask, DistillTask
from transformer_mt.tasks.options.one_model import EvaluateTask, ScoreTask, TrainTask, TranslateTask
from transformer_mt.tasks.options.server import ServeTask
from transformer_mt.tasks.options.tools import (
    AverageTask,
    ExportTask,
    LengthsTask,
    PushTask,
    ReportTask,
    ShortlistTask,
)

TASKS = {"train": TrainTask, "evaluate": EvaluateTask, "translate": TranslateTask, "score": ScoreTask,
         "average": AverageTask, "export": ExportTask, "push": PushTask, "report": ReportTask, "lengths": LengthsTask,
         "distill": DistillTask, "backtranslate": BacktranslateTask, "serve": ServeTask,
         "shortlist": ShortlistTask}


def register() -> None:
    """The whole schema in Hydra's ConfigStore, each task class as the option task=NAME (storing again
    replaces them: calling twice is harmless)."""
    register_groups()
    store = ConfigStore.instance()
    for name, kind in TASKS.items():
        store.store(group="task", name=name, node=kind)
