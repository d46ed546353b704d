"""task=distill: sequence-level knowledge distillation (Kim & Rush 2016) in one command, in three
stages, each a subfolder of the run folder (tasks/pipelines/stages.py):

1. synthetic/: the teacher (a checkpoint, a run folder's tested checkpoint, or an ensemble) translates
   the training sources of `data.corpus` with `task.teacher_decoding` (beam 5), in chunks written
   atomically (tasks/pipelines/synthetic.py): train.SRC, train.TGT.
2. student/: a training run, as `python run.py <this command's overrides> task=train` would make it,
   on the teacher's translations (`data.corpora.distilled`), `data.corpus` kept for validation and
   test (and trained on too with task.originals_weight > 0). Stopped, it resumes from its last.ckpt.
3. evaluation/: the student's test translations against `task.baseline`'s (a run folder), by
   sacreBLEU's paired tests: comparison.json and one line in the log.

The same command again goes on where it stopped; a stage whose inputs changed (another teacher,
other sources, other decoding options) is redone, with every stage after it."""

import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig

from transformer_mt.checkpoints.loading import load_module, task_device
from transformer_mt.config import plain
from transformer_mt.data.corpus import file_digest
from transformer_mt.errors import ConfigError
from transformer_mt.tasks.pipelines.compose import passed_on, shaping
from transformer_mt.tasks.pipelines.stage_work import compare, finished_run, synthetic_corpus, train_in
from transformer_mt.tasks.pipelines.stages import Stage, settle
from transformer_mt.tasks.pipelines.synthetic import write_synthetic
from transformer_mt.validate import check, integer, number

log = logging.getLogger(__name__)


def run(cfg: DictConfig) -> dict:
    options, folder = cfg.task, Path(cfg.paths.output_dir)
    check("task.chunk_lines", options.chunk_lines, integer(1), "an integer >= 1")
    check("task.originals_weight", options.originals_weight, number(0.0), "a number >= 0")
    teacher = teacher_checkpoints(plain(options.teacher))
    corpus = instantiate(cfg.data.corpus)
    synthetic = Stage("synthetic", folder / "synthetic", {
        "teacher": [file_digest(p) for p in teacher], "sources": corpus.fingerprint("train"),
        "decoding": plain(options.teacher_decoding), "tag": options.tag, "chunk_lines": options.chunk_lines,
        "seed": cfg.seed})
    student = Stage("student", folder / "student", {
        "synthetic": synthetic.fingerprint, "originals_weight": options.originals_weight,
        "overrides": shaping(passed_on())})
    baseline = Path(options.baseline) if options.get("baseline") else None
    evaluation = Stage("evaluation", folder / "evaluation", {"student": student.fingerprint, "baseline": str(baseline)})
    settle([synthetic, student, evaluation])
    names = (getattr(corpus, "src_lang", "src"), getattr(corpus, "tgt_lang", "tgt"))
    if synthetic.done():
        log.info("synthetic: done (%s)", synthetic.folder)
    else:
        translate_sources(cfg, teacher, corpus, synthetic, names)
    metrics = train_student(cfg, student, synthetic.folder, names)
    if baseline is not None and metrics:
        metrics["comparison"] = compare(evaluation, finished_run(baseline, "task.baseline"), metrics, "student")
    return metrics


def teacher_checkpoints(given, key: str = "task.teacher") -> list[Path]:
    """A model named by `key` (task.teacher, task.reverse) as checkpoint files: a run folder stands
    for its tested checkpoint, a list for an ensemble."""
    if given in (None, "", []):
        raise ConfigError(f"{key}: name the model (a run folder, a checkpoint, or a list of them)")
    paths = []
    for each in [given] if isinstance(given, str) else given:
        path = Path(each)
        if path.is_dir():
            path = Path(finished_run(path, key)["tested_checkpoint"])
        if not path.is_file():
            raise ConfigError(f"{key}={each}: no such checkpoint")
        paths.append(path)
    return paths


def translate_sources(cfg: DictConfig, teacher: list[Path], corpus, stage: Stage, names: tuple[str, str]) -> None:
    """Stage 1: the teacher's translations of the training sources, chunk by chunk."""
    stage.start()
    log.info("synthetic: %s translates the training sources of data.corpus into %s",
             " + ".join(map(str, teacher)), stage.folder)
    module = load_module(teacher, cfg.task.teacher_decoding, cfg.quantize).to(task_device(cfg.trainer))
    prefix = module.tokenizer.source_prefix(cfg.task.get("tag"), "task.tag")
    pairs = corpus.pairs("train")
    total = pairs.size() if pairs.size else None
    lines = write_synthetic(module, (src for src, _ in pairs), stage.folder, names, cfg.task.chunk_lines,
                            cfg.task.max_tokens, cfg.seed, total, cfg.get("progress"), prefix)
    stage.finish()
    log.info("synthetic: %d pairs in %s", lines, stage.folder)


def train_student(cfg: DictConfig, stage: Stage, synthetic: Path, names: tuple[str, str]) -> dict:
    """Stage 2: the student's training run on the teacher's translations (data.corpora.distilled),
    data.corpus trained on with task.originals_weight (0: only validated and tested on)."""
    distilled = synthetic_corpus(synthetic, names, cfg.data.corpus.get("tag"))
    return train_in(stage, [f"task.last_n={cfg.task.last_n}", f"task.tokenized_bleu={cfg.task.tokenized_bleu}",
                            f"data.corpus.weight={cfg.task.originals_weight}", f"+data.corpora.distilled={distilled}"])
