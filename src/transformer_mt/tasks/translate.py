"""task=translate: translate lines from stdin or `input=FILE` to stdout or `output=FILE`.

Lines come out in input order, one per input line (or `decoding.nbest` per line, as
`line<TAB>score<TAB>translation`, also with task.scores=true). Empty lines give empty lines.
Input that is not a terminal (a file, a pipe) is read and checked whole before anything is
translated, so a bad line (invalid UTF-8, a NUL byte) stops the run with nothing written; from a
terminal, or with an explicit `task.buffer_size`, lines are translated `task.buffer_size` (or 1) at
a time as they arrive. Batches are made by `task.max_tokens`.
"""

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import torch
from omegaconf import DictConfig

from transformer_mt.atomic import atomic_file
from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler
from transformer_mt.data.corpus import read_lines
from transformer_mt.data.text import clean, decode_text, text_lines
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.progress import ProgressBar
from transformer_mt.tasks.checkpoints import checkpoint_path, load_module
from transformer_mt.training import TranslationModule

log = logging.getLogger(__name__)

NBest = list[tuple[str, float]]


def translate_lines(module: TranslationModule, lines: list[str], max_tokens: int, first_line: int = 1,
                    bar: ProgressBar | None = None) -> list[NBest]:
    """The n-best translations of each line, in order; an empty line gets n empty ones, score 0.
    `bar` advances by the lines of each batch as it is translated."""
    cleaned, _ = clean(lines)
    todo = [i for i, line in enumerate(cleaned) if line]
    n = getattr(module.search, "nbest", 1)
    results: list[NBest] = [[("", 0.0)] * n for _ in lines]
    if bar is not None:
        bar.advance(len(lines) - len(todo))
    if not todo:
        return results
    max_positions = module.model.config.max_positions
    src = module.tokenizer.encode_sources([cleaned[i] for i in todo])
    for i, ids in zip(todo, src):
        if len(ids) >= max_positions:
            raise DataError(f"input line {first_line + i}: {len(ids)} tokens, more than the model's "
                            f"max_positions={max_positions} allows")
    collate = Collator(module.pad_id, module.bos_id, module.eos_id)
    sampler = TokenBudgetBatchSampler([len(s) for s in src], max(max_tokens, max(map(len, src))), shuffle=False)
    device = module.device
    for batch in sampler:
        padded = collate.pad([src[j] for j in batch]).to(device)
        for j, nbest in zip(batch, module.translate(padded)):
            results[todo[j]] = nbest
        if bar is not None:
            bar.advance(len(batch))
    return results


def read_chunks(stream: BinaryIO, size: int, name: str) -> Iterator[list[str]]:
    """Lists of up to `size` lines (decoded, without line endings) as they arrive."""
    chunk, number = [], 0
    for raw in iter(stream.readline, b""):
        number += 1
        chunk.extend(text_lines(decode_text(raw, name, first_line=number)))  # one line: raw is not empty
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def read_all(stream: BinaryIO, name: str) -> list[str]:
    """Every line of `stream`, all checked (as files are) before any is translated."""
    return text_lines(decode_text(stream.read(), name))


def in_chunks(lines: list[str], size: int = 1000) -> Iterator[list[str]]:
    """`lines` in lists of up to `size` (the translation loop's unit)."""
    return (lines[i : i + size] for i in range(0, len(lines), size))


def input_chunks(cfg: DictConfig) -> tuple[Iterator[list[str]], int | None]:
    """The input in chunks to translate, and its number of lines when known. A file, or stdin that
    is not a terminal (without an explicit task.buffer_size), is read and checked whole first: a bad
    line stops the run before any output. From a terminal, or with task.buffer_size, lines are
    translated as they arrive (their number is not known)."""
    if cfg.get("input"):
        lines = read_lines(cfg.input)
        return in_chunks(lines), len(lines)
    size = cfg.task.buffer_size
    if size is not None and size < 1:
        raise ConfigError(f"task.buffer_size must be >= 1, got {size}")
    if size is None and not sys.stdin.isatty():
        lines = read_all(sys.stdin.buffer, "stdin")
        return in_chunks(lines), len(lines)
    return read_chunks(sys.stdin.buffer, size or 1, "stdin"), None


def check_output(path: str | None) -> None:
    """A ConfigError naming output= when `path` cannot become a file: checked before translating."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"output={path}: is a directory")
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"output={path}: cannot create it, {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"output={path}: cannot write in {parent} (permission denied)")


@contextmanager
def open_output(path: str | None):
    """stdout, or a file that appears only once it is complete."""
    if path is None:
        yield sys.stdout
        return
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        yield f


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def run(cfg: DictConfig) -> None:
    options = cfg.task
    ckpt = checkpoint_path(cfg)
    check_output(cfg.get("output"))
    chunks, total = input_chunks(cfg)  # whole input (not from a terminal): a clear error before anything is written
    module = load_module(ckpt, cfg.decoding, cfg.quantize)
    module.to(pick_device(options.device))
    with_scores = bool(options.scores) or int(cfg.decoding.get("nbest", 1)) > 1
    line_no = 0
    # a bar for a known amount of input only: lines typed at a terminal come back as they are translated
    setting = cfg.get("progress") if total is not None else False
    with open_output(cfg.get("output")) as out, ProgressBar("translating", total, "lines", setting) as bar:
        for chunk in chunks:
            for nbest in translate_lines(module, chunk, options.max_tokens, first_line=line_no + 1, bar=bar):
                if with_scores:
                    out.writelines(f"{line_no}\t{score:.4f}\t{text}\n" for text, score in nbest)
                else:
                    out.write(nbest[0][0] + "\n")
                line_no += 1
            out.flush()
    log.info("translated %d lines", line_no)
