"""task=translate: translate lines from stdin or `input=FILE` to stdout or `output=FILE`.

Lines come out in input order, one per input line (or `decoding.nbest` per line, as
`line<TAB>score<TAB>translation`, also with task.scores=true). Empty lines give empty lines.
Lines are read `task.buffer_size` at a time and batched by `task.max_tokens`; from a terminal
each line is translated as soon as it is typed.
"""

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import torch
from omegaconf import DictConfig

from transformer_mt.atomic import atomic_file
from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler
from transformer_mt.data.corpus import clean, read_lines
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.tasks.common import checkpoint_path
from transformer_mt.tasks.evaluate import load_module
from transformer_mt.training import TranslationModule

log = logging.getLogger(__name__)

NBest = list[tuple[str, float]]


def translate_lines(module: TranslationModule, lines: list[str], max_tokens: int, first_line: int = 1) -> list[NBest]:
    """The n-best translations of each line, in order; an empty line gets n empty ones, score 0."""
    cleaned, _ = clean(lines)
    todo = [i for i, line in enumerate(cleaned) if line]
    n = getattr(module.search, "nbest", 1)
    results: list[NBest] = [[("", 0.0)] * n for _ in lines]
    if not todo:
        return results
    eos, max_positions = module.tokenizer.src.special_ids["eos_id"], module.model.config.max_positions
    src = [ids + [eos] for ids in module.tokenizer.src.encode([cleaned[i] for i in todo])]
    for i, ids in zip(todo, src):
        if len(ids) >= max_positions:
            raise DataError(f"input line {first_line + i}: {len(ids)} tokens, more than the model's "
                            f"max_positions={max_positions} allows")
    collate = Collator(module.hparams.pad_id, module.hparams.bos_id, module.hparams.eos_id)
    sampler = TokenBudgetBatchSampler([len(s) for s in src], max(max_tokens, max(map(len, src))), shuffle=False)
    device = module.device
    for batch in sampler:
        padded = collate.pad([src[j] for j in batch]).to(device)
        for j, nbest in zip(batch, module.translate(padded)):
            results[todo[j]] = nbest
    return results


def read_chunks(stream: TextIO, size: int, name: str) -> Iterator[list[str]]:
    """Lists of up to `size` lines (without line endings) as they arrive."""
    chunk, number = [], 0
    while True:
        try:
            line = stream.readline()
        except UnicodeDecodeError:
            raise DataError(f"{name}:{number + 1}: invalid UTF-8") from None
        if not line:
            break
        number += 1
        chunk.append(line.rstrip("\n").rstrip("\r"))
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


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
    module = load_module(checkpoint_path(cfg))
    module.set_decoding(cfg.decoding)
    module.to(pick_device(options.device))
    with_scores = bool(options.scores) or int(cfg.decoding.get("nbest", 1)) > 1
    if cfg.get("input"):
        lines = read_lines(cfg.input)  # whole file: a clear error before anything is written
        chunks: Iterator[list[str]] = (lines[i : i + 1000] for i in range(0, len(lines), 1000))
    else:
        size = options.buffer_size or (1 if sys.stdin.isatty() else 1000)
        if size < 1:
            raise ConfigError(f"task.buffer_size must be >= 1, got {size}")
        chunks = read_chunks(sys.stdin, size, "stdin")
    line_no = 0
    with open_output(cfg.get("output")) as out:
        for chunk in chunks:
            for nbest in translate_lines(module, chunk, options.max_tokens, first_line=line_no + 1):
                if with_scores:
                    out.writelines(f"{line_no}\t{score:.4f}\t{text}\n" for text, score in nbest)
                else:
                    out.write(nbest[0][0] + "\n")
                line_no += 1
            out.flush()
    log.info("translated %d lines", line_no)
