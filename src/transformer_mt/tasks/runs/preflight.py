"""The paths a task reads and writes, as its schema class declares them (schema/task_base.py), checked
before torch and Lightning are imported (seconds of a command's start): a missing checkpoint, teacher
or input file, a file that cannot be a checkpoint, task=score's uneven files, a sweep or run folder
that is not there are refused at once. Each check is the one the
task makes again when it reads the path (the same functions); what takes torch to tell, such as
what a checkpoint holds, is left to the task."""

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from transformer_mt.checkpoints.files import (
    check_checkpoint_files,
    checkpoint_paths,
    finished_run,
    model_checkpoints,
)
from transformer_mt.checkpoints.shortlist_file import check_shortlist_exists
from transformer_mt.choices import OWN_LAST
from transformer_mt.config import plain
from transformer_mt.data.corpus import check_file
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.schema.task_base import (
    AlignedFiles,
    Checkpoints,
    FinishedRun,
    Folder,
    InputFile,
    ModelCheckpoints,
    PathDeclaration,
    ScoredPairs,
    ServedModels,
    TrainingStart,
)
from transformer_mt.tasks.lines.pairs import check_aligned_files, check_pair_files
from transformer_mt.tasks.lines.writing import output_refusal
from transformer_mt.validate import refuse


def check_paths(cfg: DictConfig) -> None:
    """A ConfigError or DataError naming the key or file of the first path of cfg's task that cannot
    be what the task reads or writes, as its schema class declares them (schema/task_base.py): the
    paths it reads, then its decoding.shortlist, then the files it writes."""
    kind = OmegaConf.get_type(cfg.task)
    for declared in kind.reads:
        check_read(cfg, declared)
    check_shortlist(cfg, kind.shortlisted)
    for declared in kind.writes:
        refuse(output_refusal(cfg.task.get(declared.key)))


def check_read(cfg: DictConfig, declared: PathDeclaration) -> None:
    """One declared path the task reads, checked as the task will read it."""
    options = cfg.task
    match declared:
        case Checkpoints(key=key, optional=optional) if cfg.get(key) or not optional:
            check_checkpoint_files(checkpoint_paths(cfg), key)
        case TrainingStart():
            check_training_starts(cfg)
        case ServedModels():
            for name, paths in served_checkpoints(cfg).items():
                check_checkpoint_files(paths, f"task.models.{name}" if options.get("models") else "ckpt_path")
        case ModelCheckpoints(key=key) if options.get(key):
            check_checkpoint_files(model_checkpoints(plain(options[key]), f"task.{key}"), f"task.{key}")
        case InputFile(key=key, special=special) if options.get(key):
            check_file(Path(options[key]), special=special)
        case ScoredPairs():
            check_pair_files(options)
        case AlignedFiles(first=first, second=second):
            check_aligned_files(str(options[first]), str(options[second]))
        case Folder(key=key) if options.get(key) and not Path(options[key]).is_dir():
            raise DataError(f"task.{key}={options[key]}: no such directory")
        case FinishedRun(key=key) if options.get(key):
            finished_run(Path(options[key]), f"task.{key}")


def check_shortlist(cfg: DictConfig, shortlisted: bool | None) -> None:
    """decoding.shortlist=true: the lexical table beside the (first) checkpoint of a task that decodes
    over it (shortlisted) is there; a task that decodes otherwise (shortlisted False) is refused."""
    task = cfg.task.name
    asked = [key for key in ("decoding", "val_decoding") if (cfg.get(key) or {}).get("shortlist") is True]
    if asked and shortlisted is False:
        raise ConfigError(f"{asked[0]}.shortlist=true: task={task} does not decode over a vocabulary shortlist "
                          f"(task=evaluate and task=translate do); set {asked[0]}.shortlist=false")
    if asked and shortlisted:
        check_shortlist_exists(checkpoint_paths(cfg)[0])


def check_training_starts(cfg: DictConfig) -> None:
    """task=train: the checkpoint it resumes (ckpt_path, but `last`: its own, or none yet) and the
    model it fine-tunes (model.init_from: a checkpoint or a folder) exist."""
    given = plain(cfg.get("ckpt_path"))
    if given and given != OWN_LAST:
        check_checkpoint_files(checkpoint_paths(cfg), "ckpt_path")
    init_from = cfg.model.get("init_from")
    if init_from and not Path(init_from).exists():
        raise missing_init_from(init_from)


def missing_init_from(path: Path | str) -> ConfigError:
    """The one line of a model.init_from that is not there."""
    return ConfigError(f"model.init_from={path}: no such file or folder (a checkpoint, a run folder or a Marian "
                       "folder)")


def served_checkpoints(cfg: DictConfig) -> dict[str, list[Path]]:
    """task=serve's models by name, each its checkpoint files (several: an ensemble), checked to
    exist: task.models, or ckpt_path served as `default`."""
    models = plain(cfg.task.get("models"))
    if not models:
        return {"default": checkpoint_paths(cfg)}
    served = {}
    for name, given in models.items():
        paths = [Path(p) for p in ([given] if isinstance(given, str) else given)]
        for path in paths:
            if not path.is_file():
                raise DataError(f"task.models.{name}={path}: no such file")
        served[str(name)] = paths
    return served
