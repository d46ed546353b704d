"""data.shape_grid: training batches of at most K shapes (rows, length), so that a compiled step
(and its CUDA graphs) is built once per shape and never again.

The K lengths are fitted to the corpus: of every choice of at most K lengths among the padded
sizes that occur, the one that pads the fewest positions, each example padded up to the smallest
length that holds it and the last batch of each length filled up with rows that count for nothing
(`Collator`), so that every batch has its length's shape (an exact dynamic programme over the
distinct sizes, which bucketing by quantiles only approximates). A batch of length L has
max_tokens // L rows. Source and target are both padded to the length (the batch budget counts the
longer side already)."""

from dataclasses import dataclass

import numpy as np

from transformer_mt.errors import DataError


def padding_table(values: np.ndarray, counts: np.ndarray, max_tokens: int) -> np.ndarray:
    """cost[a, b]: positions padded when the examples of distinct sizes values[a..b] make one shape
    of length values[b]: each padded up to it, and the last batch filled up to the shape's rows
    (inf for a > b)."""
    n_prefix = np.concatenate([[0], np.cumsum(counts)])
    s_prefix = np.concatenate([[0], np.cumsum(counts * values)])
    a, b = np.arange(len(values))[:, None], np.arange(len(values))[None, :]
    examples = n_prefix[b + 1] - n_prefix[a]
    rows = np.maximum(1, max_tokens // values[b])
    positions = -(-examples // rows) * rows * values[b]  # whole batches of the shape
    return np.where(a <= b, (positions - (s_prefix[b + 1] - s_prefix[a])).astype(np.float64), np.inf)


def fitted_lengths(sizes: np.ndarray, k: int, max_tokens: int) -> list[int]:
    """The at most `k` lengths that pad `sizes` least in batches of `max_tokens` (the largest size
    always among them; fewer when fewer pad less, the filling rows counted)."""
    values, counts = np.unique(np.asarray(sizes, dtype=np.int64), return_counts=True)
    m = len(values)
    cost = padding_table(values, counts, max_tokens)
    best = cost[0].copy()  # best[b]: the least padding of values[..b], the last shape ending at b
    starts = []  # per extra shape allowed: where the last shape starts at each b (0: no shape more)
    for _ in range(1, min(k, m)):
        options = np.concatenate([best[None, :], best[:-1, None] + cost[1:]], axis=0)
        start = options.argmin(axis=0)
        best = options[start, np.arange(m)]
        starts.append(start)
    lengths, end = [], m - 1
    for start in reversed(starts):
        if start[end]:
            lengths.append(int(values[end]))
            end = int(start[end]) - 1
    return sorted([*lengths, int(values[end])])


@dataclass(frozen=True)
class ShapeGrid:
    """The shapes of training batches: `lengths` ascending, a batch of lengths[i] has rows[i] rows."""

    lengths: tuple[int, ...]
    rows: tuple[int, ...]

    @classmethod
    def fitted(cls, sizes: np.ndarray, k: int, max_tokens: int) -> "ShapeGrid":
        """The grid of at most `k` shapes for examples of padded `sizes`, batches of `max_tokens`."""
        lengths = fitted_lengths(sizes, k, max_tokens)
        return cls(tuple(lengths), tuple(max(1, max_tokens // length) for length in lengths))

    def buckets(self, sizes: np.ndarray) -> np.ndarray:
        """Each size's shape: the index of the smallest length that holds it."""
        index = np.searchsorted(np.asarray(self.lengths), sizes, side="left")
        if len(sizes) and index.max() >= len(self.lengths):
            raise DataError(f"an example of {int(np.max(sizes))} tokens is longer than data.shape_grid's longest "
                            f"length {self.lengths[-1]}")
        return index

    def shape(self, longest: int) -> tuple[int, int]:
        """(rows, length) of the batch whose longest example has `longest` padded tokens."""
        i = int(self.buckets(np.array([longest]))[0])
        return self.rows[i], self.lengths[i]

    def shapes(self) -> list[tuple[int, int]]:
        """Every (rows, length)."""
        return list(zip(self.rows, self.lengths))

    def __str__(self) -> str:
        return ", ".join(f"{rows} x {length}" for rows, length in self.shapes())
