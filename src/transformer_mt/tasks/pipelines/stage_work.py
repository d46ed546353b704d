"""A pipeline's stages of work: its corpus (the first of data.corpora), the synthetic stage (a model
translating lines chunk by chunk), a training run in a stage's folder (resumed from its last.ckpt,
skipped when finished), the corpus node of a synthetic corpus, and a run's test translations against
a baseline run's by sacreBLEU's paired tests."""

import json
import logging
import shlex
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig

from transformer_mt.atomic import atomic_file
from transformer_mt.checkpoints.loading import task_devices
from transformer_mt.config import plain
from transformer_mt.data.corpus import Corpus, count_lines, file_lines
from transformer_mt.data.mixture import refuse_old_spelling
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.stops import raise_requested, stops_say
from transformer_mt.tasks.pipelines.compose import stage_config
from transformer_mt.tasks.pipelines.stages import Stage
from transformer_mt.tasks.pipelines.synthetic import Sources, TranslationSettings, write_synthetic

log = logging.getLogger(__name__)


def first_corpus(data: DictConfig) -> tuple[str, DictConfig]:
    """The name and node of the pipeline's corpus: the first entry of data.corpora (those set to null
    left out), the run's own, on which every stage is validated and tested (data/datamodule.py)."""
    refuse_old_spelling(data)
    named = [(str(name), node) for name, node in (data.get("corpora") or {}).items() if node is not None]
    if not named:
        raise ConfigError("data.corpora is empty: a pipeline needs a corpus (e.g. data=toy, or "
                          "data.corpora.NAME={_target_: ...})")
    return named[0]


def pipeline_corpus(cfg: DictConfig) -> tuple[Corpus, tuple[str, str]]:
    """The pipeline's corpus (first_corpus), built, and its two languages (`src` and `tgt` for a
    corpus without, the toy's)."""
    corpus = instantiate(first_corpus(cfg.data)[1])
    return corpus, (getattr(corpus, "src_lang", "src"), getattr(corpus, "tgt_lang", "tgt"))


def translate_in(stage: Stage, cfg: DictConfig, models: list[Path], decoding: DictConfig, what: str,
                 sources: Sources, names: tuple[str, str], tag: str | None = None) -> None:
    """The synthetic stage: `models` (several: an ensemble) translate with `decoding` the lines that
    `sources()` gives (chunks of lines, and their number when known; `what` says what they are),
    chunk by chunk into the stage's folder (train.{names[0]}: the lines; train.{names[1]}: their
    translations), `tag` (task.tag) put before each, on every device of trainer.devices; skipped
    when done."""
    if stage.done():
        log.info("%s: done (%s)", stage.name, stage.folder)
        return
    stage.start()
    devices = task_devices(cfg.trainer)
    log.info("%s: %s translates %s into %s%s", stage.name, " + ".join(map(str, models)), what, stage.folder,
             f" on {len(devices)} devices" if len(devices) > 1 else "")
    translation = TranslationSettings(tuple(models), plain(decoding), cfg.quantize, tag, cfg.task.max_tokens,
                                      cfg.task.chunk_lines, cfg.seed, cfg.task.engine, cfg.inter_threads,
                                      cfg.intra_threads, cfg.kernels, cfg.task.get("ct2_dir"))
    def written() -> str:
        chunks = stage.folder / "chunks"
        done = len(list(chunks.glob("*.out"))) if chunks.is_dir() else 0
        return (f"in stage {stage.name}: {done} chunks of {cfg.task.chunk_lines} lines translated ({chunks}); "
                f"go on with {pipeline_command()}")

    with stops_say(written):
        lines = write_synthetic(translation, sources, stage.folder, names, devices, cfg.get("progress"))
        raise_requested()  # a stop swallowed on the way (a decoder's thread, a finalizer) stops here all the same
    stage.finish()
    log.info("%s: %d pairs in %s", stage.name, lines, stage.folder)


def engine_input(cfg: DictConfig, models: list[Path]) -> dict:
    """The synthetic stage's input naming task.engine where it is not ours (a stage made by our
    searches keeps the fingerprint it had before the key existed); CTranslate2's refusals of the
    stage's `models` (given ones; [] for one the pipeline trains) first, before any work."""
    if cfg.task.engine == "ours":
        return {}
    from transformer_mt.inference.ct2_engine import check_engine

    check_engine(cfg, models)
    return {"engine": cfg.task.engine}


def corpus_sources(corpus: DictConfig) -> tuple[Iterable[list[str]], int | None]:
    """The training split's sources of the corpus that `corpus` builds, in chunks as read, and their
    number when the corpus can count them (a synthetic stage's Sources, with functools.partial)."""
    pairs = instantiate(corpus).pairs("train")
    return (src for src, _ in pairs), pairs.size() if pairs.size else None


def file_sources(path: Path) -> tuple[Iterable[list[str]], int]:
    """The lines of a text file and their number (a synthetic stage's Sources, with functools.partial)."""
    return [file_lines(path)], count_lines(path)


def synthetic_corpus(folder: Path, names: tuple[str, str], tag: str | None, weight: float = 1.0) -> dict:
    """The corpus node of a synthetic corpus's folder (its train split), for a stage's data.corpora."""
    return {"_target_": "transformer_mt.data.TextFileCorpus", "data_dir": str(folder), "src_lang": names[0],
            "tgt_lang": names[1], "splits": {"train": "train"}, "weight": weight, "tag": tag or None}


@contextmanager
def pipeline_stops(stages: list[Stage]) -> Iterator[None]:
    """A stop between a pipeline's stages (or in one that says no more itself): one line naming the
    stages done and the pipeline's command that goes on, and the stop's exit status."""
    def done() -> str:
        finished = [stage.name for stage in stages if stage.done()]
        return (f"between stages, {len(finished)} of {len(stages)} done ({', '.join(finished)})" if finished
                else f"before any of its {len(stages)} stages was done") + f"; go on with {pipeline_command()}"

    with stops_say(done):
        yield
        raise_requested()


def pipeline_command() -> str:
    """The command that goes on with a stopped pipeline: run.py with the overrides it was given
    (the user's hydra.* ones too: the run folder), or, outside run.py, words saying so."""
    if not HydraConfig.initialized():
        return "the pipeline's command again"
    overrides = HydraConfig.get().overrides
    given = [*overrides.task, *(o for o in overrides.hydra if not o.startswith("hydra.mode="))]
    return f"the pipeline's command again: python run.py {shlex.join(given)}"


def train_in(stage: Stage, cfg: DictConfig, changes: dict) -> dict:
    """A training run in the stage's folder: the pipeline's config as task=train with `changes`
    (compose.py), resumed from its last.ckpt, skipped (its metrics read) when finished; a stop
    names the pipeline's command to go on with, not the stage's ckpt_path."""
    from transformer_mt.tasks import run as run_task

    metrics_file = stage.folder / "metrics.json"
    if stage.done() and metrics_file.is_file():
        log.info("%s: done (%s)", stage.name, metrics_file)
        return json.loads(metrics_file.read_text())
    stage.start()
    last = stage.folder / "checkpoints" / "last.ckpt"
    if last.is_file():
        log.info("%s: resuming from %s", stage.name, last)
    changes = {**changes, "callbacks.last_checkpoint.rerun": f"{pipeline_command()} (stage {stage.name} resumes)"}
    metrics = run_task(stage_config(cfg, str(stage.folder), changes, str(last) if last.is_file() else None))
    stage.finish()
    return metrics


def compare_with_baseline(stage: Stage, baseline: dict, metrics: dict, what: str) -> dict:
    """The run of `metrics` (`what`: student, forward model) against the `baseline` run's metrics, on
    the same test references: comparison.json in the stage's folder, and one line in the log."""
    from transformer_mt.evaluation.significance import paired_test

    if stage.done():
        return json.loads((stage.folder / "comparison.json").read_text())
    hyps, base_hyps = (Path(m["translations"]).read_text().splitlines() for m in (metrics, baseline))
    refs = Path(metrics["references"]).read_text().splitlines()
    if Path(baseline["references"]).read_text().splitlines() != refs:
        raise DataError(f"the baseline {baseline['translations']} was tested on other references than the {what}")
    stage.start()
    result = paired_test(base_hyps, hyps, refs)
    comparison = {"baseline": baseline["translations"], "baseline_bleu": result.baseline, f"{what}_bleu": result.system,
                  "delta": result.delta, "ci": [result.ci_low, result.ci_high], "p_bootstrap": result.p_bootstrap,
                  "p_randomization": result.p_randomization, "significant": result.significant and result.delta != 0}
    with atomic_file(stage.folder / "comparison.json") as tmp:
        tmp.write_text(json.dumps(comparison, indent=2) + "\n")
    stage.finish()
    log.info("%s: %s %.2f BLEU, baseline %.2f (%+.2f, 95%% CI %+.2f..%+.2f, p = %.4f / %.4f: %s)", stage.name, what,
             result.system, result.baseline, result.delta, result.ci_low, result.ci_high, result.p_bootstrap,
             result.p_randomization, "significant" if comparison["significant"] else "not significant")
    return comparison
