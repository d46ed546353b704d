"""What every task class declares besides its keys: the paths it reads and writes (the preflight,
tasks/runs/preflight.py, checks each before torch is imported) and whether it decodes over a
vocabulary shortlist. Adding a task is its class (a subclass of Task, its keys as fields, `run` the
function that runs it) and its module: the preflight reads these declarations, no list of tasks."""

from dataclasses import dataclass
from typing import ClassVar


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
