"""task=backtranslate: back-translation (Sennrich et al. 2016; sampled, Edunov et al. 2018) in one
command, in stages, each a subfolder of the run folder (tasks/pipelines/stages.py):

1. baseline/: the parallel-only training run on `data.corpora` (skipped with task.baseline=RUN_FOLDER).
2. reverse/: the reverse model, a training run on the run's corpus (the first of `data.corpora`)
   turned around (its splits written as text files in reverse/data/); skipped with
   task.reverse=RUN_FOLDER|CKPT|[...].
3. synthetic/: the reverse model translates `task.monolingual` (target-side text) with
   `task.reverse_decoding` (unrestricted sampling), in chunks written atomically
   (tasks/pipelines/synthetic.py): train.TGT holds the text, train.SRC its back-translations.
4. forward/: the training run on `data.corpora` and the synthetic corpus (`data.corpora.bt`, tagged
   `task.synthetic_tag`, weighted `task.weight`).
5. evaluation/: the forward model's test translations against the baseline's, by sacreBLEU's
   paired tests: comparison.json and one line in the log.

The same command again goes on where it stopped; a stage whose inputs changed is redone, with every
stage after it."""

import logging
from contextlib import ExitStack
from functools import partial
from pathlib import Path

from omegaconf import DictConfig

from transformer_mt.atomic import atomic_file
from transformer_mt.checkpoints.files import finished_run, model_checkpoints
from transformer_mt.config import plain
from transformer_mt.data.corpus import SPLITS, file_digest, file_lines
from transformer_mt.data.mixture import corpus_key
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.tasks.pipelines.compose import training_budget, training_shape
from transformer_mt.tasks.pipelines.stage_work import (
    compare_with_baseline,
    engine_input,
    file_sources,
    first_corpus,
    pipeline_corpus,
    pipeline_stops,
    synthetic_corpus,
    train_in,
    translate_in,
)
from transformer_mt.tasks.pipelines.stages import Stage, redo_changed

log = logging.getLogger(__name__)


def run(cfg: DictConfig) -> dict:
    options, folder = cfg.task, Path(cfg.paths.output_dir)
    corpus, names = pipeline_corpus(cfg)
    monolingual = Path(str(options.monolingual))
    training, budget = {"data": corpus.fingerprint("train"), "training": training_shape(cfg)}, training_budget(cfg)
    given = model_checkpoints(plain(options.reverse), "task.reverse") if options.get("reverse") else None
    stages = {
        "baseline": Stage("baseline", folder / "baseline", training, budget),
        "reverse": Stage("reverse", folder / "reverse", training, budget),
        "synthetic": Stage("synthetic", folder / "synthetic", {
            "reverse": [file_digest(p) for p in given] if given else "reverse/",
            "monolingual": file_digest(monolingual), "decoding": plain(options.reverse_decoding),
            "chunk_lines": options.chunk_lines, "seed": cfg.seed, **engine_input(cfg, given or [])})}
    stages["forward"] = Stage("forward", folder / "forward", {
        "synthetic": stages["synthetic"].fingerprint, "weight": options.weight, "tag": options.synthetic_tag,
        **training}, budget)
    stages["evaluation"] = Stage("evaluation", folder / "evaluation", {
        "forward": stages["forward"].fingerprint, "baseline": str(options.get("baseline"))})
    if not stages["synthetic"].done() or stages["synthetic"].changed():  # else its text was read when made
        check_monolingual(monolingual)
    with pipeline_stops(list(stages.values())):
        return backtranslate_stages(cfg, stages, corpus, names, given)


def backtranslate_stages(cfg: DictConfig, stages: dict[str, Stage], corpus, names: tuple[str, str],
               given: list[Path] | None) -> dict:
    """The five stages, each skipped when done (a changed one redone, with those after it)."""
    options = cfg.task
    monolingual = Path(str(options.monolingual))
    redo_changed(list(stages.values()))
    baseline = (finished_run(Path(options.baseline), "task.baseline") if options.get("baseline")
                else train_in(stages["baseline"], cfg, {}))
    reverse = given or [reverse_model(cfg, stages["reverse"], corpus, names)]
    translate_in(stages["synthetic"], cfg, reverse, options.reverse_decoding, str(monolingual),
                 partial(file_sources, monolingual), (names[1], names[0]))
    bt = synthetic_corpus(stages["synthetic"].folder, names, options.synthetic_tag, options.weight)
    metrics = train_in(stages["forward"], cfg, {"data.corpora.bt": bt})
    if metrics and baseline:
        metrics["comparison"] = compare_with_baseline(stages["evaluation"], baseline, metrics, "forward")
    return metrics


def check_monolingual(path: Path) -> None:
    """task.monolingual read through once before any work: a missing or empty file, a binary one or
    invalid UTF-8 is one line naming the file (and line), not an error after two training runs."""
    text = False
    for line in file_lines(path):  # every line read and checked, a block at a time
        text = text or bool(line.strip())
    if not text:
        raise DataError(f"{path}: no text (task.monolingual: target-side sentences, one per line)")


def reverse_model(cfg: DictConfig, stage: Stage, corpus, names: tuple[str, str]) -> Path:
    """Stage 2: the reverse model, trained on the run's corpus (the first of data.corpora) turned
    around; its tested checkpoint."""
    data = stage.folder / "data"
    if stage.done():
        log.info("reverse: done (%s)", stage.folder)
    else:
        splits = write_reversed(corpus, data, names)
        node = {"_target_": "transformer_mt.data.TextFileCorpus", "data_dir": str(data), "src_lang": names[1],
                "tgt_lang": names[0], "splits": {split: split for split in splits}}
        train_in(stage, cfg, {corpus_key(first_corpus(cfg.data)[0]): node})
    tested = Path(finished_run(stage.folder, "task.reverse")["tested_checkpoint"])
    return stage.folder / "checkpoints" / tested.name  # in this folder, also where it was moved


def write_reversed(corpus, folder: Path, names: tuple[str, str]) -> list[str]:
    """The corpus's splits as text files folder/SPLIT.{names}, for a reverse model to read; the
    splits written (train, and val and test where the corpus has them)."""
    written = []
    for split in SPLITS:
        try:
            pairs = corpus.pairs(split)
            with ExitStack() as files:
                src, tgt = (files.enter_context(atomic_file(folder / f"{split}.{name}")) for name in names)
                with open(src, "w", encoding="utf-8") as src_out, open(tgt, "w", encoding="utf-8") as tgt_out:
                    for chunk_src, chunk_tgt in pairs:
                        src_out.writelines(line + "\n" for line in chunk_src)
                        tgt_out.writelines(line + "\n" for line in chunk_tgt)
        except (DataError, ConfigError):
            if split == "train":
                raise
            continue  # no such split: the reverse model is not validated or tested on it
        written.append(split)
    return written
