"""task=distill: sequence-level knowledge distillation (Kim & Rush 2016) in one command, in three
stages, each a subfolder of the run folder (tasks/pipelines/stages.py):

1. synthetic/: the teacher (a checkpoint, a run folder's tested checkpoint, or an ensemble) translates
   the training sources of the run's corpus (the first of `data.corpora`) with `task.teacher_decoding`
   (beam 5), in chunks written
   atomically (tasks/pipelines/synthetic.py): train.SRC, train.TGT.
2. student/: a training run, this command's config as task=train (tasks/pipelines/compose.py),
   on the teacher's translations (`data.corpora.distilled`), the run's corpus kept for validation
   and test (and trained on too with task.originals_weight > 0), with the teacher's vocabularies
   (task.teacher_vocabulary). Stopped, it resumes from its last.ckpt.
3. evaluation/: the student's test translations against `task.baseline`'s (a run folder), by
   sacreBLEU's paired tests: comparison.json and one line in the log.

The same command again goes on where it stopped; a stage whose inputs changed (another teacher,
other sources, other decoding options) is redone, with every stage after it. task.until=synthetic
stops after stage 1; task.translations=RUN takes stage 1 from another distill run of the same
inputs (copied, not translated again): several students of one teacher's translations."""

import logging
from functools import partial
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from transformer_mt.checkpoints.files import finished_run, model_checkpoints
from transformer_mt.config import plain
from transformer_mt.data.cache_entry import digest
from transformer_mt.data.corpus import file_digest
from transformer_mt.data.mixture import corpus_key
from transformer_mt.tasks.pipelines.compose import training_budget, training_shape
from transformer_mt.tasks.pipelines.stage_work import (
    compare_with_baseline,
    corpus_sources,
    engine_input,
    first_corpus,
    pipeline_corpus,
    pipeline_stops,
    synthetic_corpus,
    train_in,
    translate_in,
)
from transformer_mt.tasks.pipelines.stages import Stage, redo_changed, take_finished

log = logging.getLogger(__name__)


def run(cfg: DictConfig) -> dict:
    options, folder = cfg.task, Path(cfg.paths.output_dir)
    corpus, names = pipeline_corpus(cfg)
    teacher = model_checkpoints(plain(options.teacher), "task.teacher")
    baseline = Path(options.baseline) if options.get("baseline") else None
    baseline_run = finished_run(baseline, "task.baseline") if baseline is not None else None  # before any work
    sources = corpus.fingerprint("train")
    check_teacher_data(teacher[0], sources, cfg.data)
    synthetic = Stage("synthetic", folder / "synthetic", {
        "teacher": [file_digest(p) for p in teacher], "sources": sources,
        "decoding": plain(options.teacher_decoding), "tag": options.tag, "chunk_lines": options.chunk_lines,
        "seed": cfg.seed, **engine_input(cfg, teacher)})
    student = Stage("student", folder / "student", {
        "synthetic": synthetic.fingerprint, "originals_weight": options.originals_weight,
        "teacher_vocabulary": options.teacher_vocabulary, "training": training_shape(cfg)}, training_budget(cfg))
    evaluation = Stage("evaluation", folder / "evaluation", {"student": student.fingerprint, "baseline": str(baseline)})
    with pipeline_stops([synthetic, student, evaluation]):
        return distill_stages(cfg, teacher, baseline_run, names, (synthetic, student, evaluation))


def distill_stages(cfg: DictConfig, teacher: list[Path], baseline_run: dict | None, names: tuple[str, str],
               stages: tuple[Stage, Stage, Stage]) -> dict:
    """The three stages, each skipped when done (a changed one redone, with those after it)."""
    options = cfg.task
    synthetic, student, evaluation = stages
    redo_changed(list(stages))
    if options.translations is not None:
        take_finished(synthetic, Path(options.translations), "task.translations")
    name, node = first_corpus(cfg.data)
    translate_in(synthetic, cfg, teacher, options.teacher_decoding, f"the training sources of {corpus_key(name)}",
                 partial(corpus_sources, node), names, options.get("tag"))
    if options.until == "synthetic":
        log.info("task.until=synthetic: the teacher's translations are in %s; stopping before the student",
                 synthetic.folder)
        return {}
    vocabulary = teacher_vocabulary(teacher[0], synthetic.folder / "vocabulary") if options.teacher_vocabulary else {}
    metrics = train_student(cfg, student, synthetic.folder, names, vocabulary)
    if baseline_run is not None and metrics:
        metrics["comparison"] = compare_with_baseline(evaluation, baseline_run, metrics, "student")
    return metrics


def check_teacher_data(teacher: Path, sources: str, data: DictConfig) -> None:
    """A warning when the teacher (its first member) was trained on other data than the run's corpus's
    training split (the first of data.corpora; `sources`: its fingerprint), as when `data=` is left
    off the command line: it translates that corpus's sources all the same, as asked."""
    from transformer_mt.checkpoints.loading import describe_corpus, read_checkpoint

    record = read_checkpoint(teacher, "task.teacher")["hyper_parameters"].get("data")
    if record and record["fingerprints"].get("train") != digest(sources):
        name, node = first_corpus(data)
        log.warning("task.teacher=%s was trained on other data (%s); translating the training sources of %s as asked",
                    teacher, describe_corpus(record["config"]),
                    describe_corpus({"corpora": {name: OmegaConf.to_container(node, resolve=True)}}))


def teacher_vocabulary(checkpoint: Path, folder: Path) -> dict:
    """The teacher's vocabularies (its first member's) written to `folder` once, as the data.tokenizer
    keys that give them to the student (file, and tgt_file when the two sides have their own)."""
    from transformer_mt.checkpoints.loading import read_checkpoint
    from transformer_mt.data.tokenizer import Vocabularies

    vocabularies = Vocabularies.from_dict(read_checkpoint(checkpoint, "task.teacher")["hyper_parameters"]["tokenizer"])
    folder.mkdir(parents=True, exist_ok=True)
    paths = vocabularies.save(folder)
    if len(paths) == 1:
        return {"data.tokenizer.file": str(paths[0]), "data.tokenizer.joint": True}
    return {"data.tokenizer.file": str(paths[0]), "data.tokenizer.tgt_file": str(paths[1]),
            "data.tokenizer.joint": False}


def train_student(cfg: DictConfig, stage: Stage, synthetic: Path, names: tuple[str, str], vocabulary: dict
                  ) -> dict:
    """Stage 2: the student's training run on the teacher's translations (data.corpora.distilled),
    the run's corpus (the first of data.corpora) trained on with task.originals_weight (0: only
    validated and tested on), with the teacher's vocabularies (`vocabulary`: their data.tokenizer
    keys) or, without, one trained on its data."""
    name, node = first_corpus(cfg.data)
    distilled = synthetic_corpus(synthetic, names, node.get("tag"))
    return train_in(stage, cfg, {f"{corpus_key(name)}.weight": cfg.task.originals_weight,
                                 "data.corpora.distilled": distilled, **vocabulary})
