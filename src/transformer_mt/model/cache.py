"""The incremental-decoding cache, as typed objects that own their buffer layout.

    cache = model.init_cache(capacity, beams)   # DecoderCache: one LayerCache per decoder layer
    logits = model.decode(token, memory, src, cache=cache)   # appends this step's K, V
    cache.select(index, memory_index)           # beams move between rows, in place

The cache is a search's per-call decode state, the one object a decode call carries through the
layers: the beam layout (`beams` consecutive query rows share one memory row), and what is kept
between steps. Self-attention keeps every decoded position's keys and values
(`SelfAttentionCache`); cross-attention keeps the encoder memory's, projected once per source batch
(`CrossAttentionCache`). With store=False nothing is kept (each call decodes its whole prefix again,
for tests and benchmarks) and the cache only says the layout.
"""

from dataclasses import dataclass, field
from typing import Protocol

import torch


class KeyValueCache(Protocol):
    """What self-attention asks of its cache: SelfAttentionCache's answers, and the static step's
    (model/static_step.py)."""

    def positions(self, count: int, device: torch.device) -> torch.Tensor:
        """The positions (count,) of this call's `count` tokens, before `append`."""

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """This call's keys and values (B, H, T, d_k) written; the keys and values attended to."""

    def visible(self, mask: torch.Tensor | None) -> torch.Tensor | None:
        """The mask of the keys `append` returned, given the caller's."""


class SelfAttentionCache:
    """One self-attention layer's keys and values of the positions decoded so far.

    Stored position-major in (B, capacity, H, d_k) buffers, allocated at the first `append` for
    `capacity` positions (None, or too few: they grow, by doubling) and written in place: a row's
    filled part is contiguous, so moving beams copies one block per row and touches only the
    pages in use. `length` is a Python int: reading it never waits for the device."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity
        self.keys: torch.Tensor | None = None  # (B, capacity, H, d_k)
        self.values: torch.Tensor | None = None
        self.length = 0

    def positions(self, count: int, device: torch.device) -> torch.Tensor:
        """The positions of the next `count` tokens: length ... length + count - 1."""
        return torch.arange(self.length, self.length + count, device=device)

    def visible(self, mask: torch.Tensor | None) -> torch.Tensor | None:
        """Every position so far may be attended to: the caller's mask as it is."""
        return mask

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write this step's (B, H, T, d_k) keys and values at positions length ... length + T and
        return those of every position so far, as (B, H, length, d_k) views of the buffers."""
        start, end = self.length, self.length + k.size(2)
        if self.keys is None or self.keys.size(1) < end:
            size = max(end, self.capacity or 0, 2 * start)
            self.keys, self.values = (self._grown(old, new, size, start)
                                      for old, new in ((self.keys, k), (self.values, v)))
        self.keys[:, start:end] = k.transpose(1, 2)
        self.values[:, start:end] = v.transpose(1, 2)
        self.length = end
        return self.keys[:, :end].transpose(1, 2), self.values[:, :end].transpose(1, 2)

    @staticmethod
    def _grown(old: torch.Tensor | None, new: torch.Tensor, size: int, filled: int) -> torch.Tensor:
        """A (B, size, H, d_k) buffer holding the first `filled` positions of `old`."""
        buffer = new.new_empty(new.size(0), size, new.size(1), new.size(3))
        if filled:
            buffer[:, :filled] = old[:, :filled]
        return buffer

    def select(self, index: torch.Tensor) -> None:
        """Keep rows `index` (a row may come twice, as beams do), in place: the filled positions
        are gathered into a temporary and written back into this cache's own buffers (new ones
        only when there are more rows than before). On a CPU the fresh pages of new buffers at every
        step cost more than the copy."""
        if self.keys is None:
            return
        n, rows = self.length, index.numel()
        self.keys, self.values = (self._selected(buffer, index, n, rows) for buffer in (self.keys, self.values))

    @staticmethod
    def _selected(buffer: torch.Tensor, index: torch.Tensor, n: int, rows: int) -> torch.Tensor:
        if rows <= buffer.size(0):
            target = buffer[:rows]
            target[:, :n] = buffer[:, :n].index_select(0, index)
        else:
            target = buffer.new_empty(rows, *buffer.shape[1:])
            torch.index_select(buffer[:, :n], 0, index, out=target[:, :n])
        return target


class CrossAttentionCache:
    """One cross-attention layer's keys and values of the encoder memory, (B / beams, H, S, d_k):
    projected at the first step (or given: the static step's), reused at every later one (with
    store=False: projected at every call, never kept). `beams` query rows share one memory row."""

    def __init__(self, beams: int = 1, store: bool = True, keys: torch.Tensor | None = None,
                 values: torch.Tensor | None = None) -> None:
        self.beams, self.store = beams, store
        self.keys, self.values = keys, values

    def select(self, rows: torch.Tensor) -> None:
        """Keep the memory rows `rows` (sentences that go on)."""
        if self.keys is not None:
            self.keys, self.values = self.keys.index_select(0, rows), self.values.index_select(0, rows)


@dataclass
class LayerCache:
    """What one decoder layer keeps between decoding steps (self_attn None: nothing, store=False)."""

    self_attn: KeyValueCache | None
    cross_attn: CrossAttentionCache = field(default_factory=CrossAttentionCache)


class DecoderCache:
    """The whole decoder's cache: one LayerCache per layer, all at the same length, and the beam
    layout. store=False keeps nothing: every call decodes its whole prefix."""

    def __init__(self, num_layers: int, capacity: int | None = None, beams: int = 1, store: bool = True) -> None:
        self.beams, self.store = beams, store
        self.layers = [LayerCache(SelfAttentionCache(capacity) if store else None, CrossAttentionCache(beams, store))
                       for _ in range(num_layers)]

    @property
    def length(self) -> int:
        """Positions decoded so far (a Python int; 0 when nothing is kept)."""
        first = self.layers[0].self_attn
        return first.length if first is not None else 0

    def select(self, index: torch.Tensor, memory_index: torch.Tensor | None = None) -> None:
        """Rows `index` of the decoded positions and rows `memory_index` of the memory's K, V
        (None: the memory's stay as they are), in place."""
        for layer in self.layers:
            if layer.self_attn is not None:
                layer.self_attn.select(index)
            if memory_index is not None:
                layer.cross_attn.select(memory_index)
