"""Registers the schema in Hydra's ConfigStore: `run_schema` under conf/config.yaml, and each task
class as the option `task=NAME`. run.py and the tests' composing call `register()` once before Hydra
composes."""

from hydra.core.config_store import ConfigStore

from transformer_mt.schema.multistage import BacktranslateTask, DistillTask
from transformer_mt.schema.one_model import EvaluateTask, ScoreTask, TrainTask, TranslateTask
from transformer_mt.schema.server import ServeTask
from transformer_mt.schema.tools import AverageTask, ExportTask, LengthsTask, PushTask, ReportTask, ShortlistTask
from transformer_mt.schema.top import RunConfig

TASKS = {"train": TrainTask, "evaluate": EvaluateTask, "translate": TranslateTask, "score": ScoreTask,
         "average": AverageTask, "export": ExportTask, "push": PushTask, "report": ReportTask, "lengths": LengthsTask,
         "distill": DistillTask, "backtranslate": BacktranslateTask, "serve": ServeTask,
         "shortlist": ShortlistTask}


def register() -> None:
    """The schema's configs in the ConfigStore (storing again replaces them: calling twice is harmless)."""
    store = ConfigStore.instance()
    store.store(name="run_schema", node=RunConfig)
    for name, kind in TASKS.items():
        store.store(group="task", name=name, node=kind)
