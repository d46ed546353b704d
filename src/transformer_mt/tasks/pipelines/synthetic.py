"""A synthetic corpus: source lines translated by a model (a teacher's translations of the training
sources, or a reverse model's of target-side text), written in chunks of `chunk_lines`, each
atomically as chunks/NNNNN.in (the lines translated) and chunks/NNNNN.out (their translations,
written last: a chunk whose .out is there is done), then joined into two files, train.A (the lines)
and train.B. Killed anywhere, the same call goes on at the first
chunk not done; each chunk's decoding is seeded from (seed, chunk), so sampling gives the corpus an
uninterrupted run gives. Lines stream through: memory holds one chunk."""

import logging
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

import torch

from transformer_mt.atomic import atomic_file
from transformer_mt.progress import ProgressBar
from transformer_mt.tasks.lines.long_lines import LongLines
from transformer_mt.tasks.translate import translate_lines
from transformer_mt.training import TranslationModule

log = logging.getLogger(__name__)


def lines_in_chunks(chunks: Iterable[list[str]], size: int) -> Iterator[list[str]]:
    """The lines of `chunks` again, in chunks of `size` (the last one shorter)."""
    lines = (line for chunk in chunks for line in chunk)
    while chunk := list(islice(lines, size)):
        yield chunk


def chunk_seed(seed: int, index: int) -> int:
    """The decoding seed of chunk `index`: the same whether the chunk is decoded first or after a resume."""
    return (seed * 1_000_003 + index) % (2**63)


def write_synthetic(module: TranslationModule, sources: Iterable[list[str]], folder: Path, names: tuple[str, str],
                    chunk_lines: int, max_tokens: int, seed: int, total: int | None, progress: bool | None,
                    source_prefix: list[int] | None = None) -> int:
    """Translate the lines of `sources` (chunks of lines) into folder/train.{names[0]} (the sources)
    and folder/train.{names[1]} (their translations); a source line longer than the model takes gets
    an empty translation (the pair is then dropped from training) and is counted. The lines written."""
    chunks_dir = folder / "chunks"
    chunks_dir.mkdir(parents=True, exist_ok=True)
    long_lines, written, resumed = LongLines("skip"), 0, 0
    with ProgressBar("translating", total, "lines", progress) as bar:
        for index, lines in enumerate(lines_in_chunks(sources, chunk_lines)):
            src_file, tgt_file = chunks_dir / f"{index:05d}.in", chunks_dir / f"{index:05d}.out"
            if not tgt_file.is_file():
                torch.manual_seed(chunk_seed(seed, index))
                nbests = translate_lines(module, lines, max_tokens, first_line=written + 1, bar=bar,
                                         name="synthetic sources", long_lines=long_lines, source_prefix=source_prefix)
                write_lines(src_file, lines)
                write_lines(tgt_file, [nbest[0].text for nbest in nbests])
            else:
                resumed += 1
                bar.advance(len(lines))
            written += len(lines)
    if resumed:
        log.info("synthetic corpus: %d chunks were done already (%s), the others translated now", resumed, chunks_dir)
    long_lines.report(written)
    join(chunks_dir, folder, names)
    return written


def write_lines(path: Path, lines: list[str]) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def join(chunks_dir: Path, folder: Path, names: tuple[str, str]) -> None:
    """folder/train.{names[0]} and train.{names[1]}: the chunks' lines and translations end to end."""
    for suffix, name in zip(("in", "out"), names):
        with atomic_file(folder / f"train.{name}") as tmp, open(tmp, "w", encoding="utf-8") as out:
            for part in sorted(chunks_dir.glob(f"*.{suffix}")):
                out.write(part.read_text(encoding="utf-8"))
