"""Adding a task is one schema class and one module (schema/task_base.py): a throwaway task, declared
here with its keys, its runner (a function) and the paths it reads and writes, composes as task=NAME, has
its paths checked by the preflight before it runs, and runs through the same job as every task."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from tests.helpers import compose_config
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.schema.keys import MISSING, key
from transformer_mt.schema.task_base import InputFile, OutputFile, Task
from transformer_mt.tasks import run
from transformer_mt.validate import PATH, integer


def shout(cfg: DictConfig) -> dict:
    """The throwaway task's module: its input upper-cased into its output; the lines as its metrics."""
    lines = Path(cfg.task.input).read_text(encoding="utf-8").splitlines()
    Path(cfg.task.output).write_text("".join(line.upper() + "\n" for line in lines), encoding="utf-8")
    return {"lines": len(lines)}


@dataclass
class ShoutTask(Task):
    """python run.py task=shout task.input=FILE task.output=FILE: each line upper-cased."""

    name: Any = key("shout", "the task's name (set by task=NAME)")
    input: Any = key(MISSING, "a text file", PATH)
    output: Any = key(MISSING, "the file written", PATH)
    times: Any = key(1, "how loud", (integer(1), "an integer >= 1"))

    reads = (InputFile("input"),)
    writes = (OutputFile("output"),)
    runner = staticmethod(shout)


@pytest.fixture
def shout_task() -> None:
    ConfigStore.instance().store(group="task", name="shout", node=ShoutTask)


def test_a_task_declared_by_its_class_alone_composes_checks_and_runs(shout_task, tmp_path):
    (tmp_path / "in.txt").write_text("a cat\nthe dog\n", encoding="utf-8")
    given = [f"task.input={tmp_path}/in.txt", f"task.output={tmp_path}/out.txt"]
    metrics = run(compose_config(tmp_path / "run", ["task=shout", *given]))
    assert metrics == {"lines": 2}
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "A CAT\nTHE DOG\n"
    with pytest.raises(ConfigError, match=r"^task.times=0: must be an integer >= 1"):  # its keys' rules
        run(compose_config(tmp_path / "run", ["task=shout", *given, "task.times=0"]))
    with pytest.raises(DataError, match="missing.txt: no such file"):  # the path it declares it reads
        run(compose_config(tmp_path / "run", ["task=shout", f"task.input={tmp_path}/missing.txt",
                                              f"task.output={tmp_path}/other.txt"]))
    with pytest.raises(ConfigError, match=r"task.output=.*: is a directory"):  # and the one it writes
        run(compose_config(tmp_path / "run", ["task=shout", f"task.input={tmp_path}/in.txt",
                                              f"task.output={tmp_path}"]))
    assert not (tmp_path / "other.txt").exists()
