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

import json
import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig

from transformer_mt.atomic import atomic_file
from transformer_mt.checkpoints.loading import load_module, task_device
from transformer_mt.config import plain
from transformer_mt.data.corpus import file_digest
from transformer_mt.errors import ConfigError
from transformer_mt.tasks.pipelines.compose import passed_on, shaping, stage_config
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
        metrics["comparison"] = compare(evaluation, baseline, metrics)
    return metrics


def teacher_checkpoints(teacher) -> list[Path]:
    """task.teacher as checkpoint files: a run folder stands for its tested checkpoint."""
    if teacher in (None, "", []):
        raise ConfigError("task.teacher: name the teacher (a run folder, a checkpoint, or a list of them)")
    paths = []
    for given in [teacher] if isinstance(teacher, str) else teacher:
        path = Path(given)
        if path.is_dir():
            metrics = path / "metrics.json"
            if not metrics.is_file():
                raise ConfigError(f"task.teacher={path}: a folder without metrics.json (not a finished training run)")
            path = Path(json.loads(metrics.read_text())["tested_checkpoint"])
        if not path.is_file():
            raise ConfigError(f"task.teacher={given}: no such checkpoint")
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
    """Stage 2: the student's training run (resumed from its last.ckpt; skipped when finished)."""
    from transformer_mt.tasks import run as run_task

    metrics_file = stage.folder / "metrics.json"
    if stage.done() and metrics_file.is_file():
        log.info("student: done (%s)", metrics_file)
        return json.loads(metrics_file.read_text())
    stage.start()
    tag = cfg.data.corpus.get("tag")
    distilled = (f"{{_target_: transformer_mt.data.TextFileCorpus, data_dir: '{synthetic}', src_lang: {names[0]}, "
                 f"tgt_lang: {names[1]}, splits: {{train: train}}, tag: {tag if tag else 'null'}}}")
    overrides = ["task=train", f"task.last_n={cfg.task.last_n}", f"task.tokenized_bleu={cfg.task.tokenized_bleu}",
                 f"data.corpus.weight={cfg.task.originals_weight}", f"+data.corpora.distilled={distilled}"]
    last = stage.folder / "checkpoints" / "last.ckpt"
    if last.is_file():
        overrides.append(f"ckpt_path={last}")
        log.info("student: resuming from %s", last)
    metrics = run_task(stage_config(str(stage.folder), overrides))
    stage.finish()
    return metrics


def compare(stage: Stage, baseline: Path, metrics: dict) -> dict:
    """Stage 3: the student against the baseline run, on the same test references."""
    from transformer_mt.evaluation.significance import paired_test

    if stage.done():
        return json.loads((stage.folder / "comparison.json").read_text())
    base = json.loads((baseline / "metrics.json").read_text()) if (baseline / "metrics.json").is_file() else None
    if base is None:
        raise ConfigError(f"task.baseline={baseline}: a folder without metrics.json (not a finished training run)")
    hyps, base_hyps = (Path(m["translations"]).read_text().splitlines() for m in (metrics, base))
    refs = Path(metrics["references"]).read_text().splitlines()
    if Path(base["references"]).read_text().splitlines() != refs:
        raise ConfigError(f"task.baseline={baseline}: tested on other references than the student")
    stage.start()
    result = paired_test(base_hyps, hyps, refs)
    comparison = {"baseline": str(baseline), "baseline_bleu": result.baseline, "student_bleu": result.system,
                  "delta": result.delta, "ci": [result.ci_low, result.ci_high], "p_bootstrap": result.p_bootstrap,
                  "p_randomization": result.p_randomization, "significant": result.significant}
    with atomic_file(stage.folder / "comparison.json") as tmp:
        tmp.write_text(json.dumps(comparison, indent=2) + "\n")
    stage.finish()
    log.info("evaluation: student %.2f BLEU, baseline %.2f (%+.2f, 95%% CI %+.2f..%+.2f, p = %.4f / %.4f: %s)",
             result.system, result.baseline, result.delta, result.ci_low, result.ci_high, result.p_bootstrap,
             result.p_randomization, "significant" if result.significant else "not significant")
    return comparison
