"""The length test's segments: a test set's sentences joined n at a time (consecutive lines, the
source sides and the references alike, joined by a space), to see how models translate inputs
longer than they trained on; and the groups they are scored in: each joining (x1, x2, ...) and
each bucket of source length in words."""

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Segment:
    """One joined segment: its source and reference, how many sentences it joins (the last group
    of a joining may have fewer), its first line in the test set (from 1) and its source words."""

    source: str
    reference: str
    joins: int
    first_line: int

    @property
    def words(self) -> int:
        return len(self.source.split())


def joined(sources: Sequence[str], references: Sequence[str], n: int) -> list[Segment]:
    """The sentences in groups of `n` consecutive lines, each group one segment; the lines that are
    left at the end make a last, shorter group (no line is left out)."""
    return [Segment(" ".join(sources[i:i + n]), " ".join(references[i:i + n]), n, i + 1)
            for i in range(0, len(sources), n)]


def segments(sources: Sequence[str], references: Sequence[str], joins: Sequence[int]) -> list[Segment]:
    """Every joining's segments, joining by joining."""
    return [segment for n in joins for segment in joined(sources, references, n)]


def bucket_names(edges: Sequence[int]) -> list[str]:
    """The buckets' names: [15, 30] -> 1-15, 16-30, 31+."""
    starts = [1, *(edge + 1 for edge in edges)]
    return [f"{start}-{edge}" for start, edge in zip(starts, edges)] + [f"{starts[-1]}+"]


def bucket_of(words: int, edges: Sequence[int]) -> int:
    """The bucket of a source of `words` words (its index in bucket_names)."""
    return bisect_left(edges, words)


def groups(items: Sequence[Segment], edges: Sequence[int]) -> dict[str, list[int]]:
    """The segments' indices by group: each joining's (x1, x2, ...), then each bucket's that has any."""
    named: dict[str, list[int]] = {}
    for index, segment in enumerate(items):
        named.setdefault(f"x{segment.joins}", []).append(index)
    names = bucket_names(edges)
    buckets: dict[str, list[int]] = {}
    for index, segment in enumerate(items):
        buckets.setdefault(names[bucket_of(segment.words, edges)], []).append(index)
    return named | {name: buckets[name] for name in names if name in buckets}
