"""The task group's tools on finished runs: average, export, push, report, lengths, shortlist."""

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from transformer_mt.choices import CT2_QUANTIZATIONS, EXPORT_FORMATS, SHORTLIST_SCORINGS
from transformer_mt.schema.keys import MISSING, key
from transformer_mt.schema.shared import Batched
from transformer_mt.schema.task_base import AlignedFiles, Checkpoints, Folder, Task
from transformer_mt.tasks.options.one_model import NAME
from transformer_mt.validate import (
    AT_LEAST_0,
    AT_LEAST_1,
    BOOLEAN,
    PATH,
    Refusal,
    increasing,
    integer,
    listing,
    one_of,
    text,
)

CANDIDATES_K, FREQUENT_F = 30, 300  # task=shortlist's defaults (docs/decoding.md: tuned on Multi30k)


@dataclass
class AverageTask(Task):
    """python run.py task=average ckpt_path=[a.ckpt,b.ckpt] | task.run_dir=DIR task.last_n=N |
    task.run_dir=DIR task.best_n=N: one checkpoint whose weights are the average of those."""

    name: Any = key("average", NAME)
    run_dir: Any = key(None, "a training run's directory: its epoch checkpoints (checkpoints/epochs/)", PATH,
                       nullable=True)
    last_n: Any = key(None, "average the run's last N epoch checkpoints", AT_LEAST_1, nullable=True)
    best_n: Any = key(None, "or its N best by the monitored metric", AT_LEAST_1, nullable=True)
    output: Any = key(None, "default: average.ckpt in this task's run directory", PATH, nullable=True)

    reads = (Checkpoints(optional=True), Folder("run_dir"))

    @staticmethod
    def run_refusal(cfg: DictConfig) -> Refusal:
        """The checkpoints averaged: ckpt_path's, or task.run_dir's last_n or best_n, one way."""
        options = cfg.task
        if cfg.get("ckpt_path") and options.get("run_dir"):
            return "task=average takes ckpt_path=[...] or task.run_dir=DIR, not both"
        if not cfg.get("ckpt_path") and (not options.get("run_dir") or
                                         bool(options.get("last_n")) == bool(options.get("best_n"))):
            return ("task=average needs ckpt_path=[a.ckpt,b.ckpt,...], or task.run_dir=DIR with one of "
                    "task.last_n=N / task.best_n=N")
        return None

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.average import run
        return run(cfg)


@dataclass
class ExportTask(Task):
    """python run.py task=export ckpt_path=PATH task.format=hf|ct2 [task.output=DIR]: a Hugging Face
    MarianMTModel folder (its generation_config.json decodes as this command's `decoding`) or a
    CTranslate2 model directory."""

    name: Any = key("export", NAME)
    format: Any = key("hf", "hf: a Hugging Face MarianMTModel folder | ct2: a CTranslate2 model directory",
                      (one_of(*EXPORT_FORMATS), "hf (Hugging Face Marian) or ct2 (CTranslate2)"))
    output: Any = key(None, "a new folder; default: <format>/ in this task's run directory", PATH, nullable=True)
    quantization: Any = key(None, "task.format=ct2: the weights' type (CTranslate2's quantization); null: the "
                                  "top-level quantize (none or int8)",
                            (one_of(*CT2_QUANTIZATIONS), listing(CT2_QUANTIZATIONS)), nullable=True)

    reads = (Checkpoints(),)

    @staticmethod
    def run_refusal(cfg: DictConfig) -> Refusal:
        """task.format=hf exports float weights: no task.quantization, no top-level quantize."""
        given = cfg.task.quantization
        quantize = str(given if given is not None else cfg.quantize)
        if cfg.task.format == "hf" and quantize != "none":
            key = "task.quantization" if given is not None else "quantize"
            return (f"{key}={quantize}: task.format=hf exports the model's float weights; quantized exports are "
                    "task.format=ct2")
        return None

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.export import run
        return run(cfg)


@dataclass
class PushTask(Task):
    """python run.py task=push task.folder=DIR task.repo_id=USER/NAME: upload a task.format=hf export to
    the Hugging Face Hub."""

    name: Any = key("push", NAME)
    folder: Any = key(None, "the folder task=export task.format=hf wrote", PATH, nullable=True)
    repo_id: Any = key(None, "the Hub repository, USER/NAME", (text, "USER/NAME"), nullable=True)
    private: Any = key(True, "create the repository private", BOOLEAN)
    commit_message: Any = key("Upload a transformer-mt model", "the upload's commit message",
                              (text, "a non-empty string"))

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.push import run
        return run(cfg)


BASE_ROW = (integer(0), "an integer >= 0 or null")


@dataclass
class ReportTask(Task):
    """python run.py task=report task.sweep_dir=outputs/ablation/heads_<date> [task.metric=chrf]:
    report.md, report.csv and report.png of a sweep, each row tested against the base row."""

    name: Any = key("report", NAME)
    sweep_dir: Any = key(None, "a sweep's directory (python run.py -m ... wrote it)", PATH, nullable=True)
    base_row: Any = key(None, "the base row's number (report.md's row column); null: the row whose settings "
                              "equal the sweep's config", BASE_ROW, nullable=True)
    metric: Any = key("bleu", "the metric the significance tests compare: bleu | chrf | ter (lower is better) | "
                              "bleu_tok_lc (BLEU on 13a-tokenized lowercased text)")
    bootstrap_samples: Any = key(1000, "sacreBLEU's paired bootstrap resamples (--paired-bs-n)", AT_LEAST_1)
    randomization_trials: Any = key(10000, "sacreBLEU's approximate-randomization trials (--paired-ar-n)", AT_LEAST_1)

    reads = (Folder("sweep_dir"),)

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.report import run
        return run(cfg)


@dataclass
class LengthsTask(Batched, Task):
    """python run.py task=lengths task.sweep_dir=DIR task.source=FILE task.reference=FILE
    [task.joins=[1,2,3]] [task.buckets=[15,30,45,60]]: a sweep's models on the test set's sentences
    joined n at a time, BLEU by source length, each row tested against the base row."""

    name: Any = key("lengths", NAME)
    sweep_dir: Any = key(MISSING, "a sweep's directory (python run.py -m ... wrote it)", PATH)
    source: Any = key(MISSING, "the test set's source sentences, one a line", PATH)
    reference: Any = key(MISSING, "their reference translations, line for line", PATH)
    joins: Any = key([1, 2, 3], "how many consecutive sentences make a segment, one joining for each number "
                                "(1: the test set itself)", (increasing(1), "a list of increasing integers >= 1"))
    buckets: Any = key([15, 30, 45, 60], "the longest source (in words) of each length bucket but the last, which "
                                         "takes every longer one",
                       (increasing(1), "a list of increasing integers >= 1, such as [15, 30, 45]"))
    base_row: Any = key(None, "the base row's number (as task=report numbers them); null: the row whose settings "
                              "equal the sweep's config", BASE_ROW, nullable=True)
    bootstrap_samples: Any = key(1000, "sacreBLEU's paired bootstrap resamples (--paired-bs-n)", AT_LEAST_1)
    randomization_trials: Any = key(10000, "sacreBLEU's approximate-randomization trials (--paired-ar-n)", AT_LEAST_1)

    reads = (AlignedFiles("source", "reference"), Folder("sweep_dir"))
    shortlisted = False

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.lengths import run
        return run(cfg)


@dataclass
class ShortlistTask(Task):
    """python run.py task=shortlist ckpt_path=PATH [data=NAME] [task.candidates=K] [task.frequent=F]: the
    lexical table of decoding.shortlist=true, CKPT_STEM.shortlist.json beside the checkpoint, counted on
    the training split of the checkpoint's own data (data=checkpoint) or of data=NAME, with its tokenizer."""

    defaults: list = field(default_factory=lambda: [{"override /data@_global_.data": "checkpoint"}, "_self_"])
    name: Any = key("shortlist", NAME)
    candidates: Any = key(CANDIDATES_K, "K: the target tokens kept for each source token, best first by task.scoring "
                                        "(beyond the frequent ones)", AT_LEAST_1)
    frequent: Any = key(FREQUENT_F, "F: the most frequent target tokens, which every batch may emit",
                        AT_LEAST_0)
    scoring: Any = key("probability", "how a source token's candidates are ranked: probability (c(s,t) / c(s), p(t|s) "
                                      "by co-occurrence, sentence pairs counted) | dice (2 c(s,t) / (c(s) + c(t)))",
                       (one_of(*SHORTLIST_SCORINGS), listing(SHORTLIST_SCORINGS)))

    reads = (Checkpoints(),)

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.shortlist import run
        return run(cfg)
