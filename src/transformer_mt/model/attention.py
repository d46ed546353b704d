"""Multi-head attention on top of F.scaled_dot_product_attention, with an optional KV cache; its
positions' part (rotation, score terms) asked of an AttentionPositions, the kind's (model/positions.py)."""

import contextlib
import inspect
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from transformer_mt.model.cache import CrossAttentionCache, KeyValueCache
from transformer_mt.packing import Varlen

try:
    from torch.nn.attention.varlen import varlen_attn
except ImportError:  # pragma: no cover - torch < 2.10: packed attention takes the reference path
    varlen_attn = None


def takes_window_size(fn) -> bool:
    """Whether torch's `varlen_attn` takes the arguments `packed_attention` passes: causal masking
    by `window_size=(-1, 0)`. torch.nn.attention.varlen came with torch 2.10, whose varlen_attn
    took `is_causal=`; `window_size=` replaced it after the 2.10 branch (torch 2.13 has it)."""
    if fn is None:
        return False
    parameters = inspect.signature(fn).parameters
    return "window_size" in parameters and "is_causal" not in parameters


if not takes_window_size(varlen_attn):  # pragma: no cover - a torch whose varlen_attn we cannot call
    varlen_attn = None
VARLEN_DEVICES = ("cuda",)  # where torch's varlen kernel (flash attention's) runs
VARLEN_DTYPES = (torch.float16, torch.bfloat16)  # and in which dtypes

# The SDPA kernels attention may use on a GPU, in torch's order of preference: flash where it
# applies (no mask: decoder self-attention), memory-efficient with a padding mask, math otherwise.
# cuDNN's kernel is left out: it builds an execution plan for each new input shape, and translation
# batches change shape at every step (token-budget batches of varying lengths; a growing decoder
# state when decoding). H200, model=base, 25k-token bf16 batches: 518 ms a training step with cuDNN
# chosen, 68 ms without (experiments/gpu/README.md). On a CPU torch never picks cuDNN.
CUDA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def backends_for(device: torch.device) -> list[SDPBackend] | None:
    """The SDPA backends attention on `device` is limited to; None: whatever torch allows."""
    return CUDA_BACKENDS if device.type == "cuda" else None


def kernels(device: torch.device) -> contextlib.AbstractContextManager:
    """A block in which SDPA on `device` keeps to `backends_for(device)`: attention runs in one, and
    code that should run attention as ours does (the benchmarks' Hugging Face peers) can too."""
    backends = backends_for(device)
    return sdpa_kernel(backends) if backends else contextlib.nullcontext()


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout: float,
         is_causal: bool) -> torch.Tensor:
    """F.scaled_dot_product_attention within the kernels of q's device."""
    with kernels(q.device):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=is_causal)


class AttentionPositions(nn.Module):
    """What attention asks its positions (model/positions.py gives each kind's): here none (positions
    added to the embeddings; cross-attention), so plain SDPA. rotary.py's rotates queries and keys;
    relative.py's adds distance terms to the scores and values."""

    place = "plain"  # its attribute in MultiHeadAttention: its parameters' names in checkpoints

    def rotate(self, x: torch.Tensor, positions: torch.Tensor, heads_first: bool = True) -> torch.Tensor:
        """x (B, H, T, d_k) at positions (T,) (heads_first), or a packed stream (N, H, d_k) at (N,)."""
        return x

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               is_causal: bool, queries: torch.Tensor | None, dropout: float,
               record: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(output (B, H, T, d_k), probabilities (B, H, T, S) where `record`, else None) of q at
        positions `queries` (T,) over k, v (B, H, S, d_k) at 0 ... S - 1; mask broadcasts to
        (B, H, T, S), True where a key may be attended to; is_causal: no key after its query."""
        if not record:
            return sdpa(q, k, v, mask, dropout, is_causal), None
        return _attention_with_weights(q, k, v, mask, is_causal, dropout)

    def attend_packed(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: Varlen, is_causal: bool,
                      dropout: float) -> torch.Tensor:
        """`attend` on packed streams: q (Nq, H, d_k), k, v (Nk, H, d_k) -> (Nq, H, d_k)."""
        return packed_attention(q, k, v, layout, is_causal, dropout)


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over `heads` heads of width `d_k` (= d_v).

    Self-attention projects Q, K and V with one fused matrix; cross-attention projects Q from the
    decoder and K, V (fused) from the encoder memory. Masks are boolean, True = may attend.
    Positions: what `positions` (an AttentionPositions, the kind's) does to the queries, keys and
    scores. Inside `model.maps.attention_maps(model)` it also records its attention probabilities.
    """

    def __init__(self, d_model: int, heads: int, d_k: int, dropout: float, cross: bool = False,
                 positions: AttentionPositions | None = None) -> None:
        super().__init__()
        self.heads, self.d_k, self.cross, self.dropout = heads, d_k, cross, dropout
        positions = AttentionPositions() if positions is None else positions
        self.place = positions.place
        self.register_module(positions.place, positions)  # e.g. self_attn.relative.keys.weight in checkpoints
        inner = heads * d_k
        if cross:
            self.q_proj = nn.Linear(d_model, inner)
            self.kv_proj = nn.Linear(d_model, 2 * inner)
        else:
            self.qkv_proj = nn.Linear(d_model, 3 * inner)
        self.out_proj = nn.Linear(inner, d_model)
        self.maps: list[torch.Tensor] | None = None  # where attention_maps records this module's probabilities

    @property
    def positions(self) -> AttentionPositions:
        """This module's positions (model/positions.py), registered under their `place`."""
        return getattr(self, self.place)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.d_k).transpose(1, 2)  # (B, H, T, d_k)

    def project_memory(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of the encoder memory: computed once per source batch when decoding."""
        k, v = self.kv_proj(memory).chunk(2, dim=-1)
        return self._split(k), self._split(v)

    def _merge(self, out: torch.Tensor) -> torch.Tensor:
        """(B, H, T, d_k) heads -> (B, T, D) through the output projection."""
        b, _, t, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.d_k))

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, mask: torch.Tensor | Varlen | None = None,
                is_causal: bool = False, cache: KeyValueCache | CrossAttentionCache | None = None) -> torch.Tensor:
        """x: (B, T, D) -> (B, T, D). mask broadcasts to (B, H, T, S). One path each: packed
        streams (a `Varlen` mask: `packed`), self-attention (`self_attention`, with its cache) and
        cross-attention (`cross_attention`, with its cache and beams)."""
        if isinstance(mask, Varlen):
            return self.packed(x, memory, mask, is_causal)
        if self.cross:
            return self.cross_attention(x, memory, mask, cache)
        return self.self_attention(x, mask, is_causal, cache)

    def self_attention(self, x: torch.Tensor, mask: torch.Tensor | None, is_causal: bool,
                       cache: KeyValueCache | None) -> torch.Tensor:
        """Q, K and V from x, at their positions (the cache's next ones; no cache: 0 ...); with a
        cache, this step's K, V written into it and the keys it shows attended to (model/cache.py:
        the growing cache's, or the static step's)."""
        q, k, v = (self._split(t) for t in self.qkv_proj(x).chunk(3, dim=-1))
        count = q.size(2)
        queries = torch.arange(count, device=q.device) if cache is None else cache.positions(count, q.device)
        q, k = self.positions.rotate(q, queries), self.positions.rotate(k, queries)
        if cache is not None:
            k, v = cache.append(k, v)
            mask = cache.visible(mask)
        return self._merge(self.attend(q, k, v, mask, is_causal, queries))

    def cross_attention(self, x: torch.Tensor, memory: torch.Tensor | None, mask: torch.Tensor | None,
                        cache: CrossAttentionCache | None) -> torch.Tensor:
        """Q from x, K and V from the encoder memory (with a cache: projected once and reused, memory
        may then be None). The memory has B / beams rows, `beams` from the cache (no cache: 1):
        `beams` consecutive rows of x (the beams of a sentence) share one, attended as extra query
        positions so that the memory's K, V are never copied per beam. A query batch that is not
        exactly beams x the memory's is a ValueError."""
        k, v = self._memory_kv(memory, cache)
        return self.memory_attention(x, k, v, mask, cache.beams if cache is not None else 1)

    def memory_attention(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                         beams: int) -> torch.Tensor:
        """Cross-attention of x (B, T, D) to the memory's projected K, V (B / beams, H, S, d_k)."""
        q = self._split(self.q_proj(x))
        _check_beams(q.size(0), k.size(0), beams)
        if beams == 1:
            return self._merge(self.attend(q, k, v, mask, False))
        b, _, t, _ = q.shape  # (B, H, T) queries -> (B / beams, H, beams * T) queries, and back
        q = q.view(k.size(0), beams, self.heads, t, self.d_k).transpose(1, 2).flatten(2, 3)
        out = self.attend(q, k, v, mask, False, beams=beams)
        return self._merge(out.unflatten(2, (beams, t)).transpose(1, 2).reshape(b, self.heads, t, self.d_k))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, is_causal: bool,
               queries: torch.Tensor | None = None, beams: int = 1) -> torch.Tensor:
        """The heads' attention, (B, H, T, d_k), as the positions compute it (queries: at positions
        `queries`); inside `attention_maps` with the probabilities recorded (as (B x beams, H,
        T / beams, S) for queries that are `beams` sentences' beams side by side)."""
        dropout = self.dropout if self.training else 0.0
        out, weights = self.positions.attend(q, k, v, mask, is_causal, queries, dropout, self.maps is not None)
        if self.maps is not None:
            if beams > 1:
                weights = weights.unflatten(2, (beams, weights.size(2) // beams)).transpose(1, 2).flatten(0, 1)
            self.maps.append(weights)
        return out

    def packed(self, x: torch.Tensor, memory: torch.Tensor | None, layout: Varlen, is_causal: bool) -> torch.Tensor:
        """Packed streams: x (Nq, D) and the memory (Nk, D) of cross-attention -> (Nq, D)."""
        if self.maps is not None:
            raise ValueError("attention_maps records padded batches; packed streams have no (T, S) maps")
        heads = (self.heads, self.d_k)
        if self.cross:
            q = self.q_proj(x).unflatten(-1, heads)
            k, v = (t.unflatten(-1, heads) for t in self.kv_proj(memory).chunk(2, dim=-1))
        else:
            q, k, v = (t.unflatten(-1, heads) for t in self.qkv_proj(x).chunk(3, dim=-1))
        q = self.positions.rotate(q, layout.queries.positions, heads_first=False)
        k = self.positions.rotate(k, layout.keys.positions, heads_first=False)
        out = self.positions.attend_packed(q, k, v, layout, is_causal, self.dropout if self.training else 0.0)
        return self.out_proj(out.flatten(1))

    def _memory_kv(self, memory: torch.Tensor | None,
                   cache: CrossAttentionCache | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-attention's K, V: from the cache once computed, else projected from the memory (and cached)."""
        if cache is None or not cache.store:
            return self.project_memory(memory)
        if cache.keys is None:
            cache.keys, cache.values = self.project_memory(memory)
        return cache.keys, cache.values


def _check_beams(query_rows: int, memory_rows: int, beams: int) -> None:
    """Cross-attention's layout: exactly `beams` query rows per memory row."""
    if beams < 1 or query_rows != beams * memory_rows:
        raise ValueError(
            f"cross-attention got {query_rows} query rows for {memory_rows} memory rows with beams={beams}; "
            f"expected beams x memory rows = {beams * memory_rows}"
        )


def _attention_with_weights(q, k, v, mask, is_causal, dropout):
    """The same computation as SDPA, returning the (B, H, T, S) attention probabilities too."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if is_causal:
        t, s = scores.shape[-2:]
        mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    out = F.dropout(weights, p=dropout) @ v
    return out, weights


def uses_varlen_kernel(q: torch.Tensor, dropout: float) -> bool:
    """Whether `packed_attention` runs torch's variable-length kernel: on a GPU, in fp16 / bf16,
    without attention dropout (the kernel has none), where torch has it as we call it. Elsewhere
    it runs the exact reference (`reference_attention`), slower than padding: a run on a GPU
    refuses that (tasks/runs/config_checks.py, `packed_refusal`)."""
    return (varlen_attn is not None and q.device.type in VARLEN_DEVICES and q.dtype in VARLEN_DTYPES
            and dropout == 0.0)


def packed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: Varlen, causal: bool,
                     dropout: float) -> torch.Tensor:
    """Attention of each query sequence to its key sequence: q (Nq, H, d_k), k, v (Nk, H, d_k) ->
    (Nq, H, d_k). causal: query i of a sequence sees keys 0..i of it (self-attention only)."""
    if uses_varlen_kernel(q, dropout):
        return varlen_attn(q, k, v, layout.queries.cu_seqlens, layout.keys.cu_seqlens, layout.queries.max_length,
                           layout.keys.max_length, window_size=(-1, 0) if causal else (-1, -1))
    return reference_attention(q, k, v, layout, causal, dropout)


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: Varlen, causal: bool,
                        dropout: float) -> torch.Tensor:
    """`packed_attention` as the padded path computes it: the rows laid out (B, H, L, d_k), SDPA
    with a key-padding mask (or causal: right padding needs none), the real rows taken back."""
    queries, keys = layout.queries, layout.keys
    qp, kp, vp = (packed.unpack(t).transpose(1, 2) for packed, t in ((queries, q), (keys, k), (keys, v)))
    mask = None
    if not causal:
        mask = (torch.arange(keys.max_length, device=q.device) < keys.lengths()[:, None])[:, None, None, :]
    out = sdpa(qp, kp, vp, mask, dropout, causal)
    return queries.pack(out.transpose(1, 2))
