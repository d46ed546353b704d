"""Rotary positions (RoPE, Su et al. 2021): the queries and keys of self-attention are rotated by
their positions, so that their dot product depends on the positions' difference only; no position
is added to the embeddings (model.positional=rotary). The pairs rotated are dimensions (i, i + d/2)
of each head (the GPT-NeoX and Llama layout), at angles position * base ** (-2i / d)."""

import torch

from transformer_mt.model.attention import AttentionPositions

BASE = 10000.0


class Rotary(AttentionPositions):
    """The cosines and sines of every position up to `max_positions` for heads of width `d_k`: one
    table, shared by every self-attention of a model (model/positions.py), which asks it to rotate."""

    place = "rotary"

    def __init__(self, d_k: int, max_positions: int) -> None:
        super().__init__()
        inverse = BASE ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
        angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * inverse[None, :]  # (P, d_k / 2)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, heads_first: bool = True) -> torch.Tensor:
        """`rotate`."""
        return self.rotate(x, positions, heads_first)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor, heads_first: bool = True) -> torch.Tensor:
        """x rotated by `positions`: x (B, H, T, d_k) with positions (T,) (heads_first), or a packed
        stream x (N, H, d_k) with positions (N,)."""
        cos, sin = self.cos[positions].to(x.dtype), self.sin[positions].to(x.dtype)
        if not heads_first:
            cos, sin = cos[:, None, :], sin[:, None, :]  # (N, 1, d_k / 2): the same for every head
        first, second = x.chunk(2, dim=-1)
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
