"""The paths a task reads, checked before torch and Lightning are imported (seconds of a command's
start): a missing checkpoint, teacher or input file, a file that cannot be a checkpoint, task=score's
uneven files, a sweep or run folder that is not there are refused at once. Each check is the one the
task makes again when it reads the path (the same functions); what takes torch to tell, such as
what a checkpoint holds, is left to the task."""

from pathlib import Path

from omegaconf import DictConfig

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
from transformer_mt.errors import ConfigError
from transformer_mt.tasks.lines.pairs import check_aligned_files, check_pair_files
from transformer_mt.tasks.lines.writing import check_output

READS_CKPT_PATH = ("evaluate", "translate", "score", "export", "shortlist")  # the tasks ckpt_path is the model of
SHORTLISTED = ("evaluate", "translate")  # the tasks that decode over a vocabulary shortlist (decoding.shortlist)
UNSHORTLISTED = ("train", "distill", "backtranslate", "serve", "lengths")  # decode, but not over one


def check_paths(cfg: DictConfig) -> None:
    """A ConfigError or DataError naming the key or file of the first path of cfg's task that cannot
    be what the task reads (cfg.task.name: the task)."""
    task, options = cfg.task.name, cfg.task
    if task == "serve":
        for name, paths in served_checkpoints(cfg).items():
            check_checkpoint_files(paths, f"task.models.{name}" if cfg.task.get("models") else "ckpt_path")
    if task in READS_CKPT_PATH or (task == "average" and cfg.get("ckpt_path")):
        check_checkpoint_files(checkpoint_paths(cfg), "ckpt_path")
    if task == "train":
        check_training_starts(cfg)
    check_shortlist(cfg)
    if task in ("translate", "score"):
        check_output(options.get("output"))
    if task == "translate" and options.get("input"):
        check_file(Path(options.input), special=True)
    if task == "score":
        check_pair_files(options)
    if task in ("distill", "backtranslate"):
        check_pipeline_inputs(options)
    if task == "lengths":
        check_aligned_files(str(options.source), str(options.reference))
    folder_key = {"average": "run_dir", "report": "sweep_dir", "lengths": "sweep_dir"}.get(task)
    if folder_key and options.get(folder_key) and not Path(options[folder_key]).is_dir():
        raise ConfigError(f"task.{folder_key}={options[folder_key]}: no such directory")


def check_shortlist(cfg: DictConfig) -> None:
    """decoding.shortlist=true: the lexical table beside the (first) checkpoint of a task that decodes
    over it is there; a task that decodes otherwise is refused (task=score, teacher-forced, reads none)."""
    task = cfg.task.name
    asked = [key for key in ("decoding", "val_decoding") if (cfg.get(key) or {}).get("shortlist") is True]
    if asked and task in UNSHORTLISTED:
        raise ConfigError(f"{asked[0]}.shortlist=true: task={task} does not decode over a vocabulary shortlist "
                          f"(task={' and task='.join(SHORTLISTED)} do); set {asked[0]}.shortlist=false")
    if asked and task in SHORTLISTED:
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


def check_pipeline_inputs(options: DictConfig) -> None:
    """task=distill and task=backtranslate: the models they translate with (task.teacher,
    task.reverse), the monolingual text and the baseline run folder they are given."""
    for key in ("teacher", "reverse"):
        if options.get(key):
            check_checkpoint_files(model_checkpoints(plain(options[key]), f"task.{key}"), f"task.{key}")
    if options.get("monolingual"):
        check_file(Path(options.monolingual))
    if options.get("baseline"):
        finished_run(Path(options.baseline), "task.baseline")


def served_checkpoints(cfg: DictConfig) -> dict[str, list[Path]]:
    """task=serve's models by name, each its checkpoint files (several: an ensemble), checked to
    exist: task.models, or ckpt_path served as `default`."""
    models = plain(cfg.task.get("models"))
    if not models:
        return {"default": checkpoint_paths(cfg)}
    if cfg.get("ckpt_path"):
        raise ConfigError("task=serve takes ckpt_path=PATH (one model, served as default) or task.models={NAME: "
                          "PATH, ...}, not both")
    served = {}
    for name, given in models.items():
        paths = [Path(p) for p in ([given] if isinstance(given, str) else given)]
        for path in paths:
            if not path.is_file():
                raise ConfigError(f"task.models.{name}={path}: no such file")
        served[str(name)] = paths
    return served
