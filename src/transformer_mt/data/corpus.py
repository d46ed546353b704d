"""Parallel text: reading aligned files with clear errors, and the cleaning rule.

Cleaning rule (documented in the README): every line is stripped of leading and trailing
whitespace and runs of inner whitespace become one space. In the training split a pair with an
empty side is dropped; validation and test are never filtered. Both are counted and logged.
"""

import codecs
import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from transformer_mt.errors import DataError

log = logging.getLogger(__name__)

SPLITS = ("train", "val", "test")
_SPACE = re.compile(r"\s+")
_BARE_CR = re.compile(r"\r(?!\n)")


@dataclass
class ParallelText:
    """Aligned source and target sentences of one split."""

    src: list[str]
    tgt: list[str]
    name: str = ""
    stats: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.src)


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file, without line endings (LF or CRLF; a leading BOM is dropped).

    Errors name the file and line: unreadable, NUL bytes, invalid UTF-8, bare CR line endings.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    return text_lines(decode_text(read_bytes(path), str(path)))


def text_lines(text: str) -> list[str]:
    """The lines of `text` without their LF / CRLF endings."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the trailing newline ends the last line, it does not start a new one
    return [line.removesuffix("\r") for line in lines]


def read_bytes(path: Path) -> bytes:
    """The file's bytes; an OSError (permissions, I/O) becomes a DataError naming the file."""
    try:
        return path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror or err})") from None


def decode_text(data: bytes, name: str, first_line: int = 1) -> str:
    """UTF-8 text without a leading BOM; NUL bytes, invalid UTF-8 and bare CRs are `name:LINE:` errors
    (LINE counted from `first_line`, for text that starts inside a stream)."""
    data = data.removeprefix(codecs.BOM_UTF8)
    nul = data.find(b"\0")
    if nul >= 0:
        raise DataError(f"{name}:{line_at(data, nul) + first_line - 1}: NUL byte (is this a binary file?)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = line_at(data, err.start) + first_line - 1
        raise DataError(f"{name}:{line}: invalid UTF-8 (byte {data[err.start]:#04x})") from None
    bare_cr = _BARE_CR.search(text)
    if bare_cr:
        raise DataError(f"{name}:{line_at(text, bare_cr.start()) + first_line - 1}: CR line ending (old Mac style); "
                        "convert the file to LF or CRLF line endings")
    return text


def line_at(data: bytes | str, position: int) -> int:
    """The line number (from 1) of the character or byte at `position`."""
    return data.count(b"\n" if isinstance(data, bytes) else "\n", 0, position) + 1


def clean(lines: list[str]) -> tuple[list[str], int]:
    """Apply the whitespace rule; return the lines and how many of them it changed."""
    out = [_SPACE.sub(" ", line).strip() for line in lines]
    return out, sum(a != b for a, b in zip(lines, out))


def prepare_split(src: list[str], tgt: list[str], name: str, filter_empty: bool,
                  where: str | None = None) -> ParallelText:
    """Clean both sides and, for training, drop pairs with an empty side (counted). With
    `filter_empty`, no pair left is a DataError naming `where` (default: `name`)."""
    src, src_changed = clean(src)
    tgt, tgt_changed = clean(tgt)
    stats = {"pairs": len(src), "whitespace_fixed": src_changed + tgt_changed, "empty_dropped": 0}
    if filter_empty:
        keep = [i for i in range(len(src)) if src[i] and tgt[i]]
        stats["empty_dropped"] = len(src) - len(keep)
        src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
        if not keep:
            reason = " (every pair has an empty side)" if stats["pairs"] else ""
            raise DataError(f"{where or name}: no sentence pairs{reason}")
    if stats["whitespace_fixed"] or stats["empty_dropped"]:
        log.info(
            "%s: %d pairs, whitespace normalized in %d lines, %d pairs with an empty side dropped",
            name, stats["pairs"], stats["whitespace_fixed"], stats["empty_dropped"],
        )
    return ParallelText(src, tgt, name, stats)


def split_name(splits: dict[str, str], split: str) -> str:
    """What a corpus calls train / val / test (data.corpus.splits)."""
    if split not in splits:
        raise DataError(f"data.corpus.splits has no entry for split {split!r} (it has {sorted(splits)})")
    return splits[split]


def file_digest(*paths: Path, extra: str = "") -> str:
    """sha256 of the files' bytes (and `extra`): the cache key of what was read from them."""
    digest = hashlib.sha256(extra.encode())
    for path in paths:
        if not path.is_file():
            raise DataError(f"{path}: no such file")
        try:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
        except OSError as err:
            raise DataError(f"{path}: cannot read ({err.strerror or err})") from None
    return digest.hexdigest()


def read_train_lines(path: Path, split: str) -> list[str]:
    """read_lines, and for the training split an empty file is an error naming it."""
    lines = read_lines(path)
    if split == "train" and not lines:
        raise DataError(f"{path}: empty file")
    return lines


class TextFileCorpus:
    """Aligned plain-text files `{data_dir}/{prefix}.{lang}`, one sentence per line.

    `splits` maps train / val / test to file prefixes (Multi30k: test -> test2016).
    """

    def __init__(self, data_dir: str, src_lang: str, tgt_lang: str, splits: dict[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.splits = dict(splits or {s: s for s in SPLITS})

    def paths(self, split: str) -> tuple[Path, Path]:
        prefix = self.data_dir / split_name(self.splits, split)
        return Path(f"{prefix}.{self.src_lang}"), Path(f"{prefix}.{self.tgt_lang}")

    def load(self, split: str) -> ParallelText:
        src_path, tgt_path = self.paths(split)
        src, tgt = read_train_lines(src_path, split), read_train_lines(tgt_path, split)
        if len(src) != len(tgt):
            raise DataError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: files must be aligned")
        return prepare_split(src, tgt, f"{src_path.parent}/{self.splits[split]}", filter_empty=split == "train",
                             where=f"{src_path} / {tgt_path}")

    def fingerprint(self, split: str) -> str:
        return file_digest(*self.paths(split), extra=f"text:{self.src_lang}:{self.tgt_lang}")

    def location(self, split: str, index: int) -> str:
        """Where pair `index` (from 0) of an unfiltered split comes from: SRC_PATH:LINE."""
        return f"{self.paths(split)[0]}:{index + 1}"


class TableCorpus:
    """TSV files (a header row names the columns) or JSONL files (one object per line) per split.

    `splits` maps train / val / test to file names under `data_dir`; `src_column` and
    `tgt_column` name the fields; a dotted name reaches into nested objects (translation.en).
    """

    def __init__(self, data_dir: str, src_column: str, tgt_column: str, splits: dict[str, str],
                 format: str | None = None) -> None:
        self.data_dir, self.src_column, self.tgt_column = Path(data_dir), src_column, tgt_column
        self.splits, self.format = dict(splits), format

    def path(self, split: str) -> Path:
        return self.data_dir / split_name(self.splits, split)

    def _format(self, path: Path) -> str:
        fmt = self.format or {".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}.get(path.suffix)
        if fmt not in ("tsv", "jsonl"):
            raise DataError(f"{path}: cannot tell TSV from JSONL by its name; set data.corpus.format=tsv|jsonl")
        return fmt

    def load(self, split: str) -> ParallelText:
        path = self.path(split)
        lines = read_train_lines(path, split)
        rows = self._tsv(path, lines) if self._format(path) == "tsv" else self._jsonl(path, lines)
        src, tgt = [r[0] for r in rows], [r[1] for r in rows]
        return prepare_split(src, tgt, str(path), filter_empty=split == "train")

    def _tsv(self, path: Path, lines: list[str]) -> list[tuple[str, str]]:
        if not lines:
            raise DataError(f"{path}: empty file (a TSV file starts with a header row)")
        header = lines[0].split("\t")
        for column in (self.src_column, self.tgt_column):
            if column not in header:
                raise DataError(f"{path}:1: no column {column!r} in the header {header}")
        i, j = header.index(self.src_column), header.index(self.tgt_column)
        rows = []
        for number, line in enumerate(lines[1:], start=2):
            fields = line.split("\t")
            if len(fields) != len(header):
                raise DataError(f"{path}:{number}: {len(fields)} fields, the header has {len(header)}")
            rows.append((fields[i], fields[j]))
        return rows

    def _jsonl(self, path: Path, lines: list[str]) -> list[tuple[str, str]]:
        rows = []
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{number}: invalid JSON ({err.msg})") from None
            rows.append((self._field(record, self.src_column, path, number),
                         self._field(record, self.tgt_column, path, number)))
        return rows

    @staticmethod
    def _field(record, column: str, path: Path, number: int) -> str:
        value = record
        for key in column.split("."):
            if not isinstance(value, dict) or key not in value:
                raise DataError(f"{path}:{number}: no field {column!r}")
            value = value[key]
        if not isinstance(value, str):
            raise DataError(f"{path}:{number}: field {column!r} is not a string")
        return value

    def fingerprint(self, split: str) -> str:
        return file_digest(self.path(split), extra=f"table:{self.src_column}:{self.tgt_column}:{self.format}")

    def location(self, split: str, index: int) -> str:
        """Where pair `index` (from 0) of an unfiltered split comes from: PATH:LINE (TSV: after the header)."""
        path = self.path(split)
        return f"{path}:{index + (2 if self._format(path) == 'tsv' else 1)}"
