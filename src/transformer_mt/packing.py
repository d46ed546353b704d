"""Packed sequences (data.packed=true): a batch's sentences end to end, no padding.

A `Packed` says where each sequence of a stream lies (cumulative lengths, the longest, each
token's position and sequence); a `Packing` holds the source's and the target's. The data
collator builds both with numpy, before the transfer; the model runs on the (tokens, d_model)
streams, so matmuls, LayerNorm and the loss see only real tokens, and attention runs per sequence
(`model.attention.packed_attention`).
"""

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Packed:
    """Where the sequences of a packed stream of N tokens lie."""

    cu_seqlens: torch.Tensor  # (B + 1,) int32: sequence i is rows cu_seqlens[i]:cu_seqlens[i + 1]
    max_length: int  # the longest sequence: a Python int, known without a device sync
    positions: torch.Tensor  # (N,) int64: each token's position in its sequence
    segments: torch.Tensor  # (N,) int64: each token's sequence

    @classmethod
    def from_lengths(cls, lengths: np.ndarray) -> "Packed":
        """The layout of sequences of these lengths, end to end (numpy, on the host)."""
        lengths = np.asarray(lengths, dtype=np.int64)
        ends = np.cumsum(lengths)
        starts = ends - lengths
        segments = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        positions = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64) - starts[segments]
        cu = np.concatenate([[0], ends]).astype(np.int32)
        return cls(torch.from_numpy(cu), int(lengths.max(initial=0)), torch.from_numpy(positions),
                   torch.from_numpy(segments))

    @property
    def count(self) -> int:
        """How many sequences."""
        return self.cu_seqlens.size(0) - 1

    def lengths(self) -> torch.Tensor:
        """(B,) the length of each sequence, on the device."""
        return (self.cu_seqlens[1:] - self.cu_seqlens[:-1]).long()

    def pin_memory(self) -> "Packed":
        """Page-locked copies (the DataLoader's pin_memory calls this)."""
        return Packed(self.cu_seqlens.pin_memory(), self.max_length, self.positions.pin_memory(),
                      self.segments.pin_memory())

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) rows -> (B, max_length, ...) padded with zeros."""
        out = x.new_zeros(self.count, self.max_length, *x.shape[1:])
        out[self.segments, self.positions] = x
        return out

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, ...) padded -> (N, ...) the rows of real positions."""
        return x[self.segments, self.positions]


@dataclass
class Packing:
    """The layouts of a packed batch: its source and target streams (the same sentences in order)."""

    src: Packed
    tgt: Packed

    def pin_memory(self) -> "Packing":
        return Packing(self.src.pin_memory(), self.tgt.pin_memory())


@dataclass
class Varlen:
    """What packed attention attends: the queries' layout and the keys' (the same for self-attention)."""

    queries: Packed
    keys: Packed
