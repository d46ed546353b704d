"""Parallel text: reading aligned files with clear errors, and the cleaning rule, as a stream.

A corpus gives each split as `pairs(split)`: chunks of aligned (source, target) sentences, read,
checked and cleaned as they are iterated, so that memory never holds more than a chunk, whatever
the corpus size. `load(split)` collects them (small corpora, tests).

Cleaning rule (documented in docs/data.md, "Text rule"): every line is stripped of leading and trailing
whitespace and invisible format characters (Unicode category Cf: zero-width space, byte-order mark,
soft hyphen, ...), so a line holding only those is empty, and runs of inner whitespace become one
space. Format characters inside a line are kept: a zero-width joiner or non-joiner there shapes
words of scripts such as Persian or Devanagari (and emoji sequences). In the training split a pair
with an empty side is dropped; validation and test are never filtered. Both are counted and logged.
"""

import hashlib
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np

from transformer_mt.choices import SPLITS
from transformer_mt.data.text import clean, decode_text, text_lines
from transformer_mt.errors import DataError

log = logging.getLogger(__name__)

CHUNK = 10_000  # pairs per chunk of a stream
# the key a corpus says in its errors, not knowing its name (the datamodule puts it in: mixture.naming)
CORPUS_KEY = "data.corpora.NAME"
BLOCK = 1 << 22  # bytes read from a file at a time
Chunk = tuple[list[str], list[str]]  # aligned source and target sentences


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

    Errors name the file and line: missing, a directory, unreadable, NUL bytes, invalid UTF-8, bare
    CR line endings. A special file (a FIFO, /dev/stdin) is read as it comes.
    """
    return list(file_lines(path))


def check_file(path: Path, special: bool = False) -> None:
    """A DataError naming `path` unless it is a file: `PATH: no such file`, `PATH: is a directory`;
    without `special`, a FIFO or a device is `PATH: not a regular file` (a corpus is read more than
    once: its hash, its lines)."""
    if path.is_dir():
        raise DataError(f"{path}: is a directory")
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if not special and not path.is_file():
        raise DataError(f"{path}: not a regular file (a corpus is read more than once)")


def read_error(path: Path, err: OSError) -> DataError:
    """The DataError of a file that cannot be opened or read: `PATH: permission denied`, else
    `PATH: cannot read (REASON)`."""
    if isinstance(err, PermissionError):
        return DataError(f"{path}: permission denied")
    return DataError(f"{path}: cannot read ({err.strerror or err})")


def file_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 text file as read_lines gives them, read and checked a block at a time."""
    path = Path(path)
    check_file(path, special=True)
    try:
        f = open(path, "rb")
    except OSError as err:
        raise read_error(path, err) from None
    with f:
        rest, first_line = b"", 1
        while True:
            try:
                data = f.read(BLOCK)
            except OSError as err:
                raise read_error(path, err) from None
            if not data:
                break
            data = rest + data
            cut = data.rfind(b"\n") + 1  # whole lines only: a character never spans two blocks
            block, rest = data[:cut], data[cut:]
            if block:
                lines = text_lines(decode_text(block, str(path), first_line, bom=first_line == 1))
                first_line += len(lines)
                yield from lines
        if rest:
            yield from text_lines(decode_text(rest, str(path), first_line, bom=first_line == 1))


def count_lines(path: Path) -> int:
    """The lines of a text file (a last line without a line ending counted), one fast pass over
    its bytes: the total of a progress bar. 0 for a missing or unreadable file (the read names it)."""
    count, last = 0, b"\n"
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(BLOCK), b""):
                count, last = count + block.count(b"\n"), block[-1:]
    except OSError:
        return 0
    return count + (last != b"\n")


class CleanPairs:
    """A split as a stream of chunks, with the text rule applied as they are iterated: both sides
    cleaned and, with `filter_empty` (training), pairs with an empty side dropped. `stats` counts
    pairs, whitespace fixes and dropped pairs; they are logged at the end, and with `filter_empty`
    a split left with no pair is a DataError naming `where` (default: `name`). `size`, when given,
    counts the pairs the stream will give before cleaning (called only for a progress bar)."""

    def __init__(self, chunks: Iterable[Chunk], name: str, filter_empty: bool, where: str | None = None,
                 size: Callable[[], int] | None = None) -> None:
        self.chunks, self.name, self.filter_empty, self.where = chunks, name, filter_empty, where or name
        self.size = size
        self.stats = {"pairs": 0, "whitespace_fixed": 0, "empty_dropped": 0}

    def __iter__(self) -> Iterator[Chunk]:
        stats = self.stats
        for raw_src, raw_tgt in self.chunks:
            src, src_changed = clean(raw_src)
            tgt, tgt_changed = clean(raw_tgt)
            stats["pairs"] += len(src)
            stats["whitespace_fixed"] += src_changed + tgt_changed
            if self.filter_empty:
                keep = [i for i in range(len(src)) if src[i] and tgt[i]]
                stats["empty_dropped"] += len(src) - len(keep)
                if len(keep) < len(src):
                    src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
            if src:
                yield src, tgt
        if self.filter_empty and stats["pairs"] == stats["empty_dropped"]:
            reason = " (every pair has an empty side)" if stats["pairs"] else ""
            raise DataError(f"{self.where}: no sentence pairs{reason}")
        if stats["whitespace_fixed"] or stats["empty_dropped"]:
            log.info("%s: %d pairs, whitespace normalized in %d lines, %d pairs with an empty side dropped",
                     self.name, stats["pairs"], stats["whitespace_fixed"], stats["empty_dropped"])

    def collect(self) -> ParallelText:
        """The whole split in memory."""
        src, tgt = [], []
        for chunk_src, chunk_tgt in self:
            src += chunk_src
            tgt += chunk_tgt
        return ParallelText(src, tgt, self.name, dict(self.stats))


def in_chunks(src: list[str], tgt: list[str], size: int = CHUNK) -> Iterator[Chunk]:
    """In-memory sentences as chunks of a stream."""
    for start in range(0, len(src), size):
        yield src[start : start + size], tgt[start : start + size]


def aligned_chunks(src_path: Path, tgt_path: Path, train: bool, size: int = CHUNK) -> Iterator[Chunk]:
    """The lines of two aligned files, `size` at a time, checked as they are read; files of
    different line counts are a DataError naming both counts (found when the shorter one ends), and
    for training an empty file is one."""
    for path in (src_path, tgt_path):
        check_file(path)
        if train and path.stat().st_size == 0:
            raise DataError(f"{path}: empty file")
    src_lines, tgt_lines = file_lines(src_path), file_lines(tgt_path)
    count = 0
    while True:
        src, tgt = list(islice(src_lines, size)), list(islice(tgt_lines, size))
        if len(src) != len(tgt):
            src_count = count + len(src) + sum(1 for _ in src_lines)
            tgt_count = count + len(tgt) + sum(1 for _ in tgt_lines)
            raise DataError(f"{src_path} has {src_count} lines but {tgt_path} has {tgt_count}: files must be "
                            "aligned")
        if not src:
            if train and count == 0:  # a file of only a byte-order mark
                raise DataError(f"{src_path}: empty file")
            return
        count += len(src)
        yield src, tgt


def in_folder(folder: Path, name: str) -> Path:
    """`folder`/`name`, or a DataError naming a corpus's `data_dir` that is no folder."""
    if not folder.is_dir():
        raise DataError(f"{folder}: no such folder (a corpus's data_dir; data=multi30k's is under paths.data_dir, "
                        "which is $DATA_DIR, else data/ in the project)")
    return folder / name


def split_name(splits: dict[str, str], split: str) -> str:
    """What a corpus calls train / val / test (its `splits`)."""
    if split not in splits:
        raise DataError(f"{CORPUS_KEY}.splits has no entry for split {split!r} (it has {sorted(splits)})")
    return splits[split]


def file_digest(*paths: Path, extra: str = "") -> str:
    """sha256 of the files' bytes (and `extra`): the cache key of what was read from them."""
    digest = hashlib.sha256(extra.encode())
    for path in paths:
        check_file(path)
        try:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
        except OSError as err:
            raise read_error(path, err) from None
    return digest.hexdigest()


class Corpus(ABC):
    """What the datamodule reads a corpus through: TextFileCorpus, TableCorpus, HubCorpus (hub.py)
    and ToyCorpus (toy.py) implement it.

    Every corpus also says how a run mixes it with others (data.corpora; data/mixture.py): `weight`,
    the times an epoch shows each of its training pairs (2: twice; 0.5: a different half each epoch;
    0: never, the corpus is only evaluated on), `tag`, a token put before each of its sources
    (e.g. <bt> for back-translated pairs; an M2M-100 / NLLB model's source language code, __en__ or
    eng_Latn), and `target_tag`, a token put before each of its targets, which decoding forces as
    the first output token (a target language code: __de__, deu_Latn); the vocabulary keeps both
    whole."""

    weight: float = 1.0
    tag: str | None = None
    target_tag: str | None = None

    @abstractmethod
    def pairs(self, split: str) -> CleanPairs:
        """The split's pairs, streamed in chunks, checked and cleaned as they are read."""

    @abstractmethod
    def fingerprint(self, split: str) -> str:
        """What the split's content is (a hash of its files, or of the options that generate it)."""

    @abstractmethod
    def location(self, split: str, index: int) -> str:
        """Where pair `index` (from 0) of the split comes from, for error messages."""

    def load(self, split: str) -> ParallelText:
        """The whole split in memory (small corpora and tests; the datamodule streams `pairs`)."""
        return self.pairs(split).collect()


class TextFileCorpus(Corpus):
    """Aligned plain-text files `{data_dir}/{prefix}.{lang}`, one sentence per line.

    `splits` maps train / val / test to file prefixes (Multi30k: test -> test2016).
    """

    def __init__(self, data_dir: str, src_lang: str, tgt_lang: str, splits: dict[str, str] | None = None,
                 weight: float = 1.0, tag: str | None = None,
                 target_tag: str | None = None) -> None:
        self.weight, self.tag, self.target_tag = weight, tag, target_tag
        self.data_dir = Path(data_dir)
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.splits = dict(splits or {s: s for s in SPLITS})

    def paths(self, split: str) -> tuple[Path, Path]:
        prefix = in_folder(self.data_dir, split_name(self.splits, split))
        return Path(f"{prefix}.{self.src_lang}"), Path(f"{prefix}.{self.tgt_lang}")

    def pairs(self, split: str) -> CleanPairs:
        src_path, tgt_path = self.paths(split)
        return CleanPairs(aligned_chunks(src_path, tgt_path, train=split == "train"),
                          f"{src_path.parent}/{self.splits[split]}", filter_empty=split == "train",
                          where=f"{src_path} / {tgt_path}", size=lambda: count_lines(src_path))


    def fingerprint(self, split: str) -> str:
        return file_digest(*self.paths(split), extra=f"text:{self.src_lang}:{self.tgt_lang}")

    def location(self, split: str, index: int) -> str:
        """Where pair `index` (from 0) of an unfiltered split comes from: SRC_PATH:LINE."""
        return f"{self.paths(split)[0]}:{index + 1}"


class TableCorpus(Corpus):
    """TSV files (a header row names the columns) or JSONL files (one object per line) per split.

    `splits` maps train / val / test to file names under `data_dir`; `src_column` and
    `tgt_column` name the fields; a dotted name reaches into nested objects (translation.en).
    """

    def __init__(self, data_dir: str, src_column: str, tgt_column: str, splits: dict[str, str],
                 format: str | None = None, weight: float = 1.0, tag: str | None = None,
                 target_tag: str | None = None) -> None:
        self.weight, self.tag, self.target_tag = weight, tag, target_tag
        self.data_dir, self.src_column, self.tgt_column = Path(data_dir), src_column, tgt_column
        self.splits, self.format = dict(splits), format

    def path(self, split: str) -> Path:
        return in_folder(self.data_dir, split_name(self.splits, split))

    def _format(self, path: Path) -> str:
        fmt = self.format or {".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}.get(path.suffix)
        if fmt not in ("tsv", "jsonl"):
            raise DataError(f"{path}: cannot tell TSV from JSONL by its name; set {CORPUS_KEY}.format=tsv|jsonl")
        return fmt

    def pairs(self, split: str) -> CleanPairs:
        path = self.path(split)
        check_file(path)
        if split == "train" and path.stat().st_size == 0:
            raise DataError(f"{path}: empty file")
        tsv = self._format(path) == "tsv"
        rows = self._tsv(path) if tsv else self._jsonl(path)
        return CleanPairs(table_chunks(rows), str(path), filter_empty=split == "train",
                          size=lambda: max(0, count_lines(path) - tsv))


    def _tsv(self, path: Path) -> Iterator[tuple[str, str]]:
        lines = file_lines(path)
        header = next(lines, None)
        if header is None:
            raise DataError(f"{path}: empty file (a TSV file starts with a header row)")
        header = header.split("\t")
        for column in (self.src_column, self.tgt_column):
            if column not in header:
                raise DataError(f"{path}:1: no column {column!r} in the header {header}")
        i, j = header.index(self.src_column), header.index(self.tgt_column)
        for number, line in enumerate(lines, start=2):
            fields = line.split("\t")
            if len(fields) != len(header):
                raise DataError(f"{path}:{number}: {len(fields)} fields, the header has {len(header)}")
            yield fields[i], fields[j]

    def _jsonl(self, path: Path) -> Iterator[tuple[str, str]]:
        for number, line in enumerate(file_lines(path), start=1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{number}: invalid JSON ({err.msg})") from None
            yield (self._field(record, self.src_column, path, number),
                   self._field(record, self.tgt_column, path, number))

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


def table_chunks(rows: Iterator[tuple[str, str]], size: int = CHUNK) -> Iterator[Chunk]:
    """(source, target) rows as chunks of a stream."""
    while True:
        chunk = list(islice(rows, size))
        if not chunk:
            return
        yield [src for src, _ in chunk], [tgt for _, tgt in chunk]


def sample_pairs(chunks: Iterable[Chunk], size: int | None, seed: int = 0) -> ParallelText:
    """A uniform sample of `size` pairs of a stream, drawn in one pass (reservoir sampling) with a
    fixed seed, the pairs kept in their order; all of them when the stream has no more (or size
    is None). stats["pairs"]: how many the stream had."""
    rng = np.random.default_rng(seed)
    kept: list[tuple[int, str, str]] = []
    seen = 0
    for src, tgt in chunks:
        room = len(src) if size is None else max(0, min(len(src), size - len(kept)))
        kept += zip(range(seen, seen + room), src[:room], tgt[:room])
        if room < len(src):  # the reservoir is full: item i replaces a random one with probability size / (i + 1)
            index = np.arange(seen + room, seen + len(src))
            slots = rng.integers(0, index + 1)
            for k in np.flatnonzero(slots < size).tolist():
                kept[slots[k]] = (int(index[k]), src[room + k], tgt[room + k])
        seen += len(src)
    kept.sort()
    return ParallelText([s for _, s, _ in kept], [t for _, _, t in kept], stats={"pairs": seen})
