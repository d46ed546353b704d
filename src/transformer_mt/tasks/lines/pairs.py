"""task=score's input: sentence pairs from two aligned files (`task.source`, `task.target`), one TSV file
(`task.input`, source<TAB>target a line) or stdin (TSV), read and checked whole before anything is
scored. Errors name the key, or the file and line."""

import sys
from dataclasses import dataclass

from omegaconf import DictConfig

from transformer_mt.data.corpus import read_lines
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


def aligned_files(source: str, target: str) -> Pairs:
    """The lines of two files that must have as many."""
    src, tgt = read_lines(source), read_lines(target)
    if len(src) != len(tgt):
        raise DataError(f"{source} has {len(src)} lines but {target} has {len(tgt)}: files must be aligned")
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


def read_pairs(options: DictConfig) -> Pairs:
    """The pairs task.source / task.target, task.input or stdin (not a terminal) give."""
    source, target, table = options.get("source"), options.get("target"), options.get("input")
    if table and (source or target):
        raise ConfigError(f"task.input={table} and task.source / task.target both given: use task.input=FILE.tsv "
                          "or task.source=FILE task.target=FILE")
    if source or target:
        if not (source and target):
            given, missing = ("source", "target") if source else ("target", "source")
            raise ConfigError(f"task.{given}={source or target}: task.{missing}=FILE is needed too")
        return aligned_files(str(source), str(target))
    if table:
        return tsv_pairs(read_lines(table), str(table))
    if sys.stdin.isatty():
        raise ConfigError("task=score needs task.source=FILE task.target=FILE, task.input=FILE.tsv, or "
                          "source<TAB>target lines on stdin")
    return tsv_pairs(read_all(sys.stdin.buffer, "stdin"), "stdin")
