"""The task group's options that train and use one model: train, evaluate, translate, score. Each
class is the option `task=NAME` (registered in the ConfigStore by tasks/options' `register`); its docstring is the
task's usage, its fields the keys `task.KEY`, declared here once with default, rule and description."""

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from transformer_mt.choices import ALIGNMENT_UNITS, LONG_LINES
from transformer_mt.schema.keys import key
from transformer_mt.schema.shared import Batched, Engined, Languaged, Trained
from transformer_mt.schema.task_base import Checkpoints, InputFile, OutputFile, ScoredPairs, Task, TrainingStart
from transformer_mt.validate import AT_LEAST_1, BOOLEAN, PATH, Refusal, integer, listing, one_of

NAME = "the task's name (set by task=NAME)"
INPUT = (PATH[0], "a file path, or null for stdin")
OUTPUT = (PATH[0], "a file path, or null for stdout")


@dataclass
class TrainTask(Trained, Task):
    """python run.py [model=... data=... trainer=...]: train, validate with BLEU, test the best checkpoint."""

    name: Any = key("train", NAME)

    reads = (TrainingStart(),)
    shortlisted = False
    trains = True

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.train import run
        return run(cfg)


@dataclass
class EvaluateTask(Trained, Task):
    """python run.py task=evaluate ckpt_path=PATH [data.split=val] [data=...] [decoding=...]: test a
    checkpoint, on its own data (data=checkpoint) unless data=NAME or a preset says otherwise. It
    takes task=train's keys so that a training preset (experiment=multi30k_recipe: its data, model
    and decoding) evaluates too; it tests ckpt_path whatever task.last_n says."""

    defaults: list = field(default_factory=lambda: [{"override /data@_global_.data": "checkpoint"}, "_self_"])
    name: Any = key("evaluate", NAME)

    reads = (Checkpoints(),)
    shortlisted = True

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.evaluate import run
        return run(cfg)


@dataclass
class TranslateTask(Languaged, Engined, Task):
    """python run.py task=translate ckpt_path=PATH [task.input=FILE] [task.output=FILE] [decoding=beam]:
    translate lines, one output line per input line."""

    name: Any = key("translate", NAME)
    input: Any = key(None, "a text file, one sentence per line; null reads stdin", INPUT, nullable=True)
    output: Any = key(None, "a file, written once complete; null writes stdout", OUTPUT, nullable=True)
    buffer_size: Any = key(None, "lines read before translating; null: 1 from a terminal, else all of stdin, "
                                 "checked first", AT_LEAST_1, nullable=True)
    scores: Any = key(False, "write line<TAB>score<TAB>translation (always when decoding.nbest > 1)", BOOLEAN)
    long_lines: Any = key("error", "a line longer than the model takes: error (stop, naming FILE:LINE) | skip (an "
                                   "empty output line) | truncate (its first max_positions - 2 tokens and EOS)",
                          (one_of(*LONG_LINES), listing(LONG_LINES)))
    prefix: Any = key(False, "lines are source<TAB>target prefix: every output starts with the prefix (forced "
                             "as the first output tokens, counted in the score)", BOOLEAN)
    alignment: Any = key(False, "add <TAB>alignment to each output: Pharaoh i-j pairs (0-based) from the "
                                "cross-attention of a teacher-forced pass over the output", BOOLEAN)
    alignment_unit: Any = key("words", "words (whitespace-separated, of the source and output lines) | subwords "
                                       "(the model's tokens)", (one_of(*ALIGNMENT_UNITS), listing(ALIGNMENT_UNITS)))
    alignment_layer: Any = key(-1, "decoder layer the alignment reads, python index (-1: the last); checked "
                                   "against the model", (integer(-(2**31)), "an integer"))
    alignment_heads: Any = key("mean", "mean | max | a head number (checked against the model)")

    reads = (Checkpoints(), InputFile("input", special=True))
    writes = (OutputFile("output"),)
    shortlisted = True

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.translate import run
        return run(cfg)


@dataclass
class ScoreTask(Languaged, Batched, Task):
    """python run.py task=score ckpt_path=PATH task.source=FILE task.target=FILE | task.input=PAIRS.tsv:
    forced decoding, SUM<TAB>NORMALIZED per pair (the target's log-probability, EOS included)."""

    name: Any = key("score", NAME)
    source: Any = key(None, "source sentences, one a line (with task.target)", PATH, nullable=True)
    target: Any = key(None, "their translations to score, line for line", PATH, nullable=True)
    input: Any = key(None, "instead of task.source / task.target: one TSV file, source<TAB>target a line; "
                           "neither: stdin (TSV)", INPUT, nullable=True)
    output: Any = key(None, "a file, written once complete; null writes stdout", OUTPUT, nullable=True)
    normalize: Any = key(False, "the second number: false per token (EOS counted); true as decoding.length_norm "
                                "does", BOOLEAN)
    token_scores: Any = key(False, "also each target token's log-probability, EOS last, space-separated", BOOLEAN)

    reads = (Checkpoints(), ScoredPairs())
    writes = (OutputFile("output"),)

    @staticmethod
    def run_refusal(cfg: DictConfig) -> Refusal:
        """The pairs scored: two aligned files (task.source, task.target) or one table (task.input), one way."""
        source, target, table = (cfg.task.get(key) for key in ("source", "target", "input"))
        if table and (source or target):
            return (f"task.input={table} and task.source / task.target both given: use task.input=FILE.tsv or "
                    "task.source=FILE task.target=FILE")
        if (source or target) and not (source and target):
            given, missing = ("source", "target") if source else ("target", "source")
            return f"task.{given}={source or target}: task.{missing}=FILE is needed too"
        return None

    @staticmethod
    def runner(cfg: DictConfig) -> dict | None:  # its module's run
        from transformer_mt.tasks.score import run
        return run(cfg)
