"""Input lines for task=translate: a file or stdin, decoded and checked by the text rule
(data/text.py), whole or in chunks as they arrive."""

import sys
from collections.abc import Iterator
from typing import BinaryIO

from omegaconf import DictConfig

from transformer_mt.data.corpus import read_lines
from transformer_mt.data.text import decode_text, strip_invisible, text_lines
from transformer_mt.errors import DataError


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


def line_chunks(lines: list[str], size: int = 1000) -> Iterator[list[str]]:
    """`lines` in lists of up to `size` (the translation loop's unit)."""
    return (lines[i : i + size] for i in range(0, len(lines), size))


def input_chunks(cfg: DictConfig) -> tuple[Iterator[list[str]], int | None]:
    """The input in chunks to translate, and its number of lines when known. A file, or stdin that
    is not a terminal (without an explicit task.buffer_size), is read and checked whole first: a bad
    line stops the run before any output. From a terminal, or with task.buffer_size, lines are
    translated as they arrive (their number is not known)."""
    if cfg.task.get("input"):
        lines = read_lines(cfg.task.input)
        return line_chunks(lines), len(lines)
    size = cfg.task.buffer_size
    if size is None and not sys.stdin.isatty():
        lines = read_all(sys.stdin.buffer, "stdin")
        return line_chunks(lines), len(lines)
    return read_chunks(sys.stdin.buffer, size or 1, "stdin"), None


FORMAT = "source<TAB>target prefix, task.prefix=true"


def split_prefixes(lines: list[str], name: str, first_line: int = 1) -> tuple[list[str], list[str]]:
    """The source and the target prefix of each line. A line that shows nothing (the text rule's
    empty line) is an empty source with an empty prefix; any other line without exactly one TAB is
    a DataError naming `name:LINE` (LINE counted from `first_line`)."""
    sources, prefixes = [], []
    for number, line in enumerate(lines, start=first_line):
        fields = line.split("\t")
        if not strip_invisible(line):
            fields = ["", ""]
        elif len(fields) != 2:
            raise DataError(f"{name}:{number}: {len(fields) - 1} tabs, expected one ({FORMAT})")
        sources.append(fields[0])
        prefixes.append(fields[1])
    return sources, prefixes


def split_constraints(lines: list[str], prefix: bool) -> tuple[list[str], list[list[str]]]:
    """decoding.constraints: each line's constraint phrases after its source (and, with task.prefix,
    after its target prefix): `source<TAB>phrase<TAB>phrase` (fairseq's format), and the lines
    without them. A line without a TAB has none."""
    keep = 2 if prefix else 1
    fields = [line.split("\t") for line in lines]
    return ["\t".join(f[:keep]) for f in fields], [f[keep:] for f in fields]
