"""What every task class declares besides its keys: its runner, the paths it reads and writes (the
preflight, tasks/runs/preflight.py, checks each before torch is imported), whether it decodes over a
vocabulary shortlist and whether it trains. Adding a task is its class (a subclass of Task in
tasks/options, its keys as fields, `runner` its module's run function) and its module: the job and
the preflight read these declarations, no list of tasks."""

from dataclasses import dataclass
from typing import ClassVar

from omegaconf import DictConfig

from transformer_mt.validate import Refusal


@dataclass(frozen=True)
class Checkpoints:
    """The checkpoint files of `key` (one path, or a list: an ensemble); optional: checked only where given."""

    key: str = "ckpt_path"
    optional: bool = False


@dataclass(frozen=True)
class ModelCheckpoints:
    """task.`key`: a checkpoint or a finished run folder (its tested checkpoint), where given."""

    key: str


@dataclass(frozen=True)
class TrainingStart:
    """task=train: the checkpoint it resumes (ckpt_path, but `last`: its own) and model.init_from."""


@dataclass(frozen=True)
class ServedModels:
    """task=serve: task.models (by name) or ckpt_path (served as `default`)."""


@dataclass(frozen=True)
class InputFile:
    """A file the task reads, task.`key`, where given (special: a FIFO or /dev/stdin too)."""

    key: str
    special: bool = False


@dataclass(frozen=True)
class ScoredPairs:
    """task=score's pairs: task.source and task.target (as many lines), or task.input."""


@dataclass(frozen=True)
class AlignedFiles:
    """Two files of as many lines, task.`first` and task.`second`."""

    first: str
    second: str


@dataclass(frozen=True)
class Folder:
    """A folder the task reads, task.`key`, where given."""

    key: str


@dataclass(frozen=True)
class FinishedRun:
    """A training run's folder with its metrics.json, task.`key`, where given."""

    key: str


@dataclass(frozen=True)
class OutputFile:
    """A file the task writes whole, task.`key` (null: stdout)."""

    key: str


PathDeclaration = (Checkpoints | ModelCheckpoints | TrainingStart | ServedModels | InputFile | ScoredPairs
                   | AlignedFiles | Folder | FinishedRun | OutputFile)


class Task:
    """A task's declarations (class attributes, not config keys)."""

    reads: ClassVar[tuple[PathDeclaration, ...]] = ()
    writes: ClassVar[tuple[PathDeclaration, ...]] = ()
    # True: decodes over decoding.shortlist when asked; False: decodes, never over one (asking is refused);
    # None: decodes nothing a shortlist restricts (task=score is teacher-forced)
    shortlisted: ClassVar[bool | None] = None
    trains: ClassVar[bool] = False  # trains a model on the run's corpus (the rules between groups of training)

    @staticmethod
    def run_refusal(cfg: DictConfig) -> Refusal:
        """What this task's keys cannot be with the rest of the config `cfg`: its one line, or None
        (asked with the rules between groups, schema/between_groups.py, right after composition)."""
        return None

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:
        """Run the task on `cfg` (checked) and return its metrics: each task class names its module's
        run function, imported only when the task runs (after the checks, which need no torch)."""
        raise NotImplementedError
