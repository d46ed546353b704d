"""Relative positions (Shaw et al. 2018, OpenNMT's max_relative_positions): self-attention learns
an embedding of each clipped distance j - i between a query i and a key j, for the keys and one for
the values, shared by the heads of a layer:

    e_ij = q_i . (k_j + a^K_ij) / sqrt(d_k),  z_i = sum_j softmax(e)_ij (v_j + a^V_ij),
    a_ij = w[clip(j - i, -c, c)]  (c: model.max_relative_positions)

No position is added to the embeddings (model.positional=relative). The attention runs as written
above (no fused kernel takes the extra terms); with the cache, queries are at their positions in
the sequence and keys at theirs, so incremental decoding equals full decoding."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from transformer_mt.model.attention import AttentionPositions
from transformer_mt.packing import Varlen


class RelativePositions(AttentionPositions):
    """The key and value embeddings of distances -c ... c for heads of width `d_k`: one layer's
    self-attention's (model/positions.py), which asks it to attend."""

    place = "relative"  # checkpoints hold self_attn.relative.keys and .values

    def __init__(self, d_k: int, clip: int) -> None:
        super().__init__()
        self.clip = clip
        self.keys = nn.Embedding(2 * clip + 1, d_k)
        self.values = nn.Embedding(2 * clip + 1, d_k)

    def distances(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(T, S) indices of the clipped distances key - query, for positions (T,) and (S,)."""
        return (keys[None, :] - queries[:, None]).clamp(-self.clip, self.clip) + self.clip

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               is_causal: bool, queries: torch.Tensor, dropout: float,
               record: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """(output (B, H, T, d_k), probabilities (B, H, T, S), whatever `record`) of q (B, H, T, d_k)
        at positions `queries` (T,) over k, v (B, H, S, d_k) at positions 0 ... S - 1; `mask`
        broadcasts to (B, H, T, S), True where a key may be attended to; `is_causal`: no key after
        its query."""
        keys = torch.arange(k.size(2), device=q.device)
        distance = self.distances(queries, keys)
        scores = q @ k.transpose(-2, -1) + torch.einsum("bhtd,tsd->bhts", q, self.keys(distance).to(q.dtype))
        scores = scores / math.sqrt(q.size(-1))
        if is_causal:
            scores = scores.masked_fill(keys[None, :] > queries[:, None], float("-inf"))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        dropped = F.dropout(weights, p=dropout)
        out = dropped @ v + torch.einsum("bhts,tsd->bhtd", dropped, self.values(distance).to(q.dtype))
        return out, weights

    def attend_packed(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: Varlen, is_causal: bool,
                      dropout: float) -> torch.Tensor:
        """Refused: no kernel takes the distance terms on packed streams."""
        raise ValueError("packed streams have no relative-position path: model.positional=relative needs "
                         "data.packed=false")
