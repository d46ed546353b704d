"""task=score's input: sentence pairs from two aligned files (`task.source`, `task.target`), one TSV file
(`task.input`, source<TAB>target a line) or stdin (TSV), read and checked whole before anything is
scored. Errors name the key, or the file and line."""

import sys
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from transformer_mt.data.corpus import check_file, count_lines, read_lines
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.tasks.lines.reading import read_all


@dataclass
class Pairs:
    """Aligned source and target sentences, and the files (or stdin) their lines came from."""

    src: list[str]
    tgt: list[str]
    src_name: str
    tgt_name: str

    def __len__(self) -> int:
        return len(self.src)

    def where(self, side: str, index: int) -> str:
        """NAME:LINE of pair `index` (from 0) on `side` (source | target)."""
        return f"{self.src_name if side == 'source' else self.tgt_name}:{index + 1}"


def unaligned(source: str, sources: int, target: str, targets: int) -> DataError:
    """The one line of two files that should have as many lines and do not."""
    return DataError(f"{source} has {sources} lines but {target} has {targets}: files must be aligned")


def aligned_files(source: str, target: str) -> Pairs:
    """The lines of two files that must have as many."""
    src, tgt = read_lines(source), read_lines(target)
    if len(src) != len(tgt):
        raise unaligned(source, len(src), target, len(tgt))
    return Pairs(src, tgt, source, target)


def tsv_pairs(lines: list[str], name: str) -> Pairs:
    """Lines of source<TAB>target; any other number of tabs names the line."""
    src, tgt = [], []
    for number, line in enumerate(lines, start=1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataError(f"{name}:{number}: {len(fields) - 1} tabs, expected one (source<TAB>target)")
        src.append(fields[0])
        tgt.append(fields[1])
    return Pairs(src, tgt, name, name)


def given_files(options: DictConfig) -> tuple[str | None, str | None, str | None]:
    """task.source, task.target and task.input (None: not given): two aligned files or one TSV file
    (one way: ScoreTask.run_refusal), or neither and stdin that is not a terminal."""
    source, target, table = (str(v) if v else None for v in map(options.get, ("source", "target", "input")))
    if not (source or table) and sys.stdin.isatty():
        raise ConfigError("task=score needs task.source=FILE task.target=FILE, task.input=FILE.tsv, or "
                          "source<TAB>target lines on stdin")
    return source, target, table


def check_pair_files(options: DictConfig) -> None:
    """Before the model loads (tasks/runs/preflight.py): the keys make sense together, the files exist,
    and two regular files have as many lines (counted, not decoded: read_pairs checks the text)."""
    source, target, table = given_files(options)
    if table:
        check_file(Path(table), special=True)
    if source and target:
        check_aligned_files(source, target)


def check_aligned_files(source: str, target: str) -> None:
    """Two files that exist, and as two regular files have as many lines (counted, not decoded)."""
    for path in (source, target):
        check_file(Path(path), special=True)
    if Path(source).is_file() and Path(target).is_file():
        sources, targets = count_lines(Path(source)), count_lines(Path(target))
        if sources != targets:
            raise unaligned(source, sources, target, targets)


def read_pairs(options: DictConfig) -> Pairs:
    """The pairs task.source / task.target, task.input or stdin (not a terminal) give."""
    source, target, table = given_files(options)
    if source and target:
        return aligned_files(source, target)
    if table:
        return tsv_pairs(read_lines(table), table)
    return tsv_pairs(read_all(sys.stdin.buffer, "stdin"), "stdin")
