"""task=translate: translate lines from stdin or `task.input=FILE` to stdout or `task.output=FILE`.

Lines come out in input order, one per input line (or `decoding.nbest` per line, as
`line<TAB>score<TAB>translation`, also with task.scores=true). Empty lines give empty lines.
ckpt_path=[a.ckpt,b.ckpt,...] translates with an ensemble (decoding/ensemble.py: the members'
probabilities averaged at every step, with this command's decoding; they share one tokenizer).
task.prefix=true reads `source<TAB>target prefix` lines, and every output starts with the prefix
(tasks/lines/prefix.py); task.alignment=true adds `<TAB>alignment` after each translation, Pharaoh pairs
from the cross-attention (tasks/lines/pharaoh.py). A line longer than the model takes stops the run,
or with task.long_lines=skip / truncate gets an empty output / is cut to fit (tasks/lines/long_lines.py).
Input that is not a terminal (a file, a pipe) is read and checked whole before anything is
translated, so a bad line (invalid UTF-8, a NUL byte) stops the run with nothing written; from a
terminal, or with an explicit `task.buffer_size`, lines are translated `task.buffer_size` (or 1) at
a time as they arrive. Batches are made by `task.max_tokens`.
"""

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

import torch
from omegaconf import DictConfig

from transformer_mt.checkpoints.loading import checkpoint_paths, load_module, task_device
from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler
from transformer_mt.data.text import clean
from transformer_mt.progress import ProgressBar
from transformer_mt.tasks.lines.long_lines import LongLines
from transformer_mt.tasks.lines.pharaoh import Alignments
from transformer_mt.tasks.lines.prefix import prefix_ids, spell, split_prefixes
from transformer_mt.tasks.lines.reading import input_chunks
from transformer_mt.tasks.lines.writing import check_output, open_output
from transformer_mt.training import TranslationModule

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Translation:
    """One output of a line: its text, its score, and with task.alignment its Pharaoh alignment."""

    text: str
    score: float
    alignment: str | None = None


NBest = list[Translation]


def translate_lines(module: TranslationModule, lines: list[str], max_tokens: int, first_line: int = 1,
                    bar: ProgressBar | None = None, name: str = "input", prefixes: list[str] | None = None,
                    alignments: Alignments | None = None, long_lines: LongLines | None = None,
                    source_prefix: list[int] | None = None) -> list[NBest]:
    """The n-best translations of each line, in order; an empty line gets n empty ones, score 0 (with
    a target prefix: the prefix), and so does a line longer than the model takes that `long_lines`
    skips (without the prefix; default rule: error). `prefixes`: one per line (task.prefix; "":
    none), which every output of the line starts with (tasks/lines/prefix.py). `bar` advances by the
    lines of each batch as it is translated. Errors name `name:LINE`, LINE counted from
    `first_line`. `source_prefix`: ids put before every source (task.tag's). The module's Translator
    decodes (one model or an ensemble, the int8 rule)."""
    cleaned, _ = clean(lines)
    starts = clean(prefixes)[0] if prefixes is not None else [""] * len(lines)
    todo = [i for i, line in enumerate(cleaned) if line]
    n = getattr(module.search, "nbest", 1)
    empty = "" if alignments else None
    results: list[NBest] = [[Translation(start, 0.0, empty)] * n for start in starts]
    max_positions = module.translator.model().config.max_positions  # an ensemble's: its members' shortest
    src = fitted_sources(module, [cleaned[i] for i in todo], max_positions, [f"{name}:{first_line + i}" for i in todo],
                         long_lines or LongLines(), source_prefix or [])
    for i in (i for i, ids in zip(todo, src) if ids is None):  # skipped: as an empty line, without the prefix
        results[i] = [Translation("", 0.0, empty)] * n
    todo, src = [i for i, ids in zip(todo, src) if ids is not None], [ids for ids in src if ids is not None]
    if bar is not None:
        bar.advance(len(lines) - len(todo))
    if not todo:
        return results
    forced = [[] for _ in todo] if prefixes is None else prefix_ids(
        module.tokenizer.tgt, [starts[i] for i in todo], max_positions - 2, name, [first_line + i for i in todo])
    collate = Collator(module.pad_id, module.bos_id, module.eos_id)
    sampler = TokenBudgetBatchSampler([len(s) for s in src], max(max_tokens, max(map(len, src))), shuffle=False)
    for batch in sampler:
        padded = collate.pad([src[j] for j in batch]).to(module.device)
        nbests = translate_batch(module, padded, [cleaned[todo[j]] for j in batch],
                                 [starts[todo[j]] for j in batch], [forced[j] for j in batch], alignments)
        for j, nbest in zip(batch, nbests):
            results[todo[j]] = nbest
        if bar is not None:
            bar.advance(len(batch))
    return results


def fitted_sources(module: TranslationModule, lines: list[str], max_positions: int, places: list[str],
                   long_lines: LongLines, prefix: list[int]) -> list[list[int] | None]:
    """The ids (`prefix` first, EOS last) of each cleaned, non-empty line as the model will see them,
    by the rule for lines longer than it takes (tasks/lines/long_lines.py: None for a skipped line)."""
    if not lines:
        return []
    src = module.tokenizer.encode_sources(lines, prefix)
    return long_lines.fit(src, max_positions, module.tokenizer.src.special_ids["eos_id"], places)


def translate_batch(module: TranslationModule, src: torch.Tensor, lines: list[str], prefixes: list[str],
                    forced: list[list[int]], alignments: Alignments | None) -> list[NBest]:
    """The n-best of each row of src (B, S), the padded ids of the cleaned `lines`; every output of
    a row starts with its prefix (text, and the ids `forced`; "" and []: none)."""
    prefix_tokens = Collator(module.pad_id, module.bos_id, module.eos_id).pad(forced) if any(forced) else None
    hyps = module.translator.hypotheses(src, prefix_tokens=prefix_tokens)
    flat = [(row, h) for row, nbest in enumerate(hyps) for h in nbest]
    outputs, rows = [h.tokens for _, h in flat], [row for row, _ in flat]

    def texts(sequences: list[list[int]], owners: list[int]) -> list[str]:
        """The text of token sequences (the first tokens of outputs[owners[i]]), as it is written."""
        return spell(module.tokenizer.tgt, sequences, [prefixes[rows[o]] for o in owners],
                     [len(forced[rows[o]]) for o in owners])

    written = texts(outputs, list(range(len(outputs))))
    marks = [None] * len(flat)
    if alignments is not None:
        marks = alignments(module.translator.members()[0], module.tokenizer, src, lines, outputs, rows, texts)
    out: list[NBest] = [[] for _ in hyps]
    for (row, h), text, mark in zip(flat, written, marks):
        out[row].append(Translation(text, h.score, mark))
    return out


def split_chunks(chunks: Iterator[list[str]], name: str, whole: bool) -> Iterator[tuple[list[str], list[str]]]:
    """task.prefix: each chunk's sources and target prefixes (tasks/lines/prefix.py). `whole` (input read
    and checked whole): every line is split now, so that a bad one stops the run before any output;
    else each chunk as it comes."""
    def split() -> Iterator[tuple[list[str], list[str]]]:
        first = 1
        for chunk in chunks:
            yield split_prefixes(chunk, name, first)
            first += len(chunk)

    return iter(list(split())) if whole else split()


def write(out: TextIO, line_no: int, nbest: NBest, with_scores: bool) -> None:
    """One input line's outputs: `text`, or `line<TAB>score<TAB>text` per hypothesis with scores;
    with alignments, `<TAB>alignment` after the text."""
    for t in nbest if with_scores else nbest[:1]:
        fields = [str(line_no), f"{t.score:.4f}", t.text] if with_scores else [t.text]
        out.write("\t".join(fields if t.alignment is None else [*fields, t.alignment]) + "\n")


def run(cfg: DictConfig) -> None:
    options = cfg.task
    paths = checkpoint_paths(cfg)
    check_output(options.get("output"))
    long_lines = LongLines.from_options(options)  # task.long_lines: one count for the whole input
    chunks, total = input_chunks(cfg)  # whole input (not from a terminal): a clear error before anything is written
    name = str(options.input) if options.get("input") else "stdin"
    if options.get("prefix"):
        pairs = split_chunks(chunks, name, whole=total is not None)
    else:
        pairs = ((chunk, None) for chunk in chunks)
    module = load_module(paths, cfg.decoding, cfg.quantize).to(task_device(cfg.trainer))
    source_prefix = module.tokenizer.source_prefix(options.get("tag"), "task.tag")
    alignments = Alignments.from_options(options, module.model)  # of the first member
    with_scores = bool(options.scores) or int(cfg.decoding.get("nbest", 1)) > 1
    line_no = 0
    # a bar for a known amount of input only: lines typed at a terminal come back as they are translated
    setting = cfg.get("progress") if total is not None else False
    with open_output(options.get("output")) as out, ProgressBar("translating", total, "lines", setting) as bar:
        for sources, prefixes in pairs:
            for nbest in translate_lines(module, sources, options.max_tokens, first_line=line_no + 1, bar=bar,
                                         name=name, prefixes=prefixes, alignments=alignments,
                                         long_lines=long_lines, source_prefix=source_prefix):
                write(out, line_no, nbest, with_scores)
                line_no += 1
            out.flush()
    long_lines.report(line_no)
    log.info("translated %d lines", line_no)
