"""task=translate: translate lines from stdin or `task.input=FILE` to stdout or `task.output=FILE`.

Lines come out in input order, one per input line (or `decoding.nbest` per line, as
`line<TAB>score<TAB>translation`, also with task.scores=true). Empty lines give empty lines.
ckpt_path=[a.ckpt,b.ckpt,...] translates with an ensemble (decoding/ensemble.py: the members'
probabilities averaged at every step, with this command's decoding; they share one tokenizer).
task.prefix=true reads `source<TAB>target prefix` lines, and every output starts with the prefix
(inference/prefix.py); task.alignment=true adds `<TAB>alignment` after each translation, Pharaoh pairs
from the cross-attention (inference/pharaoh.py). A line longer than the model takes stops the run,
or with task.long_lines=skip / truncate gets an empty output / is cut to fit (inference/long_lines.py).
Input that is not a terminal (a file, a pipe) is read and checked whole before anything is
translated, so a bad line (invalid UTF-8, a NUL byte) stops the run with nothing written; from a
terminal, or with an explicit `task.buffer_size`, lines are translated `task.buffer_size` (or 1) at
a time as they arrive. Batches are made by `task.max_tokens`. The translating is
transformer_mt.inference's (a Translator, `translate_lines`); this task reads, writes and reports.
task.engine=ctranslate2 decodes with CTranslate2 instead (inference/ct2_engine.py: the checkpoint
converted once, beside it or in the user cache, or into task.ct2_dir), the rest as it is.
"""

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

from hydra.utils import instantiate
from omegaconf import DictConfig

from transformer_mt.checkpoints.files import checkpoint_paths
from transformer_mt.checkpoints.loading import task_device
from transformer_mt.inference.ct2_engine import check_engine, ct2_translator
from transformer_mt.inference.line_translation import NBest, translate_lines
from transformer_mt.inference.long_lines import LongLines
from transformer_mt.inference.members import load_translator
from transformer_mt.inference.pharaoh import Alignments
from transformer_mt.inference.prefix import language_ids
from transformer_mt.inference.workers import Workers
from transformer_mt.progress import ProgressBar
from transformer_mt.stops import stops_say
from transformer_mt.tasks.lines.reading import input_chunks, split_constraints, split_prefixes
from transformer_mt.tasks.lines.writing import open_output, output_refusal
from transformer_mt.validate import refuse

log = logging.getLogger(__name__)


def split_chunks(chunks: Iterator[list[str]], name: str, whole: bool, prefix: bool, constrained: bool
                 ) -> Iterator[tuple[list[str], list[str] | None, list[list[str]] | None]]:
    """Each chunk's sources, target prefixes (task.prefix; else None) and constraint phrases
    (decoding.constraints; else None) (tasks/lines/reading.py). `whole` (input read and checked
    whole): every line is split now, so that a bad one stops the run before any output; else each
    chunk as it comes."""
    def split() -> Iterator[tuple[list[str], list[str] | None, list[list[str]] | None]]:
        first = 1
        for chunk in chunks:
            lines, constraints = split_constraints(chunk, prefix) if constrained else (chunk, None)
            sources, prefixes = split_prefixes(lines, name, first) if prefix else (lines, None)
            yield sources, prefixes, constraints
            first += len(chunk)

    return iter(list(split())) if whole else split()


def write(out: TextIO, line_no: int, nbest: NBest, with_scores: bool) -> None:
    """One input line's outputs: `text`, or `line<TAB>score<TAB>text` per hypothesis with scores;
    with alignments, `<TAB>alignment` after the text."""
    for t in nbest if with_scores else nbest[:1]:
        fields = [str(line_no), f"{t.score:.4f}", t.text] if with_scores else [t.text]
        out.write("\t".join(fields if t.alignment is None else [*fields, t.alignment]) + "\n")


@dataclass
class Done:
    """How far task=translate got, for the line a stop (Ctrl-C, SIGTERM) ends it with."""

    output: str | None
    total: int | None = None  # the input's lines, when read whole
    lines: int = 0  # translated and written

    def say(self) -> str:
        lines = f"after {self.lines}{f' of {self.total}' if self.total is not None else ''} lines translated"
        if self.output:  # never half-written
            return f"{lines}; task.output={self.output} not written (it appears only whole): run it again"
        return f"{lines} (written to stdout)"


def run(cfg: DictConfig) -> None:
    done = Done(cfg.task.get("output"))
    with stops_say(done.say):
        translate(cfg, done)


def translate(cfg: DictConfig, done: Done) -> None:
    """Read, load, translate, write; `done` kept up to date."""
    options = cfg.task
    paths = checkpoint_paths(cfg)
    constrained = bool(cfg.decoding.get("constraints", False))
    if options.engine == "ctranslate2":
        check_engine(cfg, paths, constrained)
    refuse(output_refusal(options.get("output")))
    long_lines = LongLines.from_options(options)  # task.long_lines: one count for the whole input
    chunks, total = input_chunks(cfg)  # whole input (not from a terminal): a clear error before anything is written
    done.total = total
    name = str(options.input) if options.get("input") else "stdin"
    parts = split_chunks(chunks, name, total is not None, bool(options.get("prefix")), constrained)
    device = task_device(cfg.trainer)
    workers = Workers.for_device(cfg.inter_threads, cfg.intra_threads, device)  # inter_threads, intra_threads
    translator = load_translator(paths, instantiate(cfg.decoding), cfg.quantize, kernels=cfg.kernels)
    source_prefix, target_prefix = language_ids(translator.tokenizer, options.get("tag"), options.get("source_lang"),
                                                options.get("target_lang"))
    alignments = Alignments.from_options(options, translator.models[0])  # of the first member
    if options.engine == "ctranslate2":
        translator = ct2_translator(paths[0], translator, device, workers, options.get("ct2_dir"))
    else:
        log.info(translator.to(device).prepared())
    members = f", an ensemble of {len(paths)}: {', '.join(map(str, paths))}" if len(paths) > 1 else ""
    log.info("task.engine=%s decodes on %s, %s (quantize=%s%s)", options.engine, device, workers.describe(),
             cfg.quantize, members)
    with_scores = bool(options.scores) or int(cfg.decoding.get("nbest", 1)) > 1
    line_no = 0
    # a bar for a known amount of input only: lines typed at a terminal come back as they are translated
    setting = cfg.get("progress") if total is not None else False
    started = time.monotonic()
    with open_output(options.get("output")) as out, ProgressBar("translating", total, "lines", setting) as bar, \
            workers:
        for sources, prefixes, constraints in parts:
            for nbest in translate_lines(translator, sources, options.max_tokens, first_line=line_no + 1, bar=bar,
                                         name=name, prefixes=prefixes, alignments=alignments,
                                         long_lines=long_lines, source_prefix=source_prefix,
                                         constraints=constraints, workers=workers,
                                         target_prefix=target_prefix):
                write(out, line_no, nbest, with_scores)
                line_no += 1
                done.lines = line_no
            out.flush()
    long_lines.report(line_no)
    if translator.search.capabilities.constraints and translator.search.unmet:
        log.warning("%d lines: their constraints do not fit their length limit (decoding.options.max_len_a, "
                    "max_len_b); each got its translation without them", translator.search.unmet)
    seconds = time.monotonic() - started
    log.info("translated %d lines in %.1f s (%.1f lines/s)", line_no, seconds, line_no / max(seconds, 1e-9))
