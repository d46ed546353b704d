"""Token embeddings scaled by sqrt(d_model), and sinusoidal or learned positions."""

import math

import torch
from torch import nn

from transformer_mt.errors import ConfigError
from transformer_mt.packing import Packed
from transformer_mt.validate import check, listing, one_of

POSITIONS = ("sinusoidal", "learned", "rotary", "relative")  # model.positional (the last two: in attention)


class TokenEmbedding(nn.Embedding):
    """An embedding table whose output is multiplied by sqrt(d_model) (paper, section 3.4)."""

    def __init__(self, vocab_size: int, d_model: int, pad_id: int) -> None:
        super().__init__(vocab_size, d_model, padding_idx=pad_id)
        self.scale = math.sqrt(d_model)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return super().forward(tokens) * self.scale


def sinusoid_table(max_positions: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))."""
    position = torch.arange(max_positions, dtype=torch.float64).unsqueeze(1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table.float()


class PositionalEncoding(nn.Module):
    """Adds positions 0..T-1 (shifted by `offset` during incremental decoding) to the input."""

    def __init__(self, kind: str, max_positions: int, d_model: int) -> None:
        super().__init__()
        check("model.positional", kind, one_of(*POSITIONS), listing(POSITIONS))
        self.kind = kind
        self.max_positions = max_positions
        if kind == "sinusoidal":
            self.register_buffer("table", sinusoid_table(max_positions, d_model), persistent=False)
        elif kind == "learned":
            self.learned = nn.Embedding(max_positions, d_model)

    def forward(self, x: torch.Tensor, offset: int = 0, packed: Packed | None = None) -> torch.Tensor:
        """x (B, T, D), or a packed stream (N, D) with its layout."""
        length = x.size(1) if packed is None else packed.max_length
        if offset + length > self.max_positions:
            raise ConfigError(
                f"sequence of {offset + length} tokens is longer than model.max_positions={self.max_positions}"
            )
        if self.kind in ("rotary", "relative"):
            return x
        table = self.table if self.kind == "sinusoidal" else self.learned.weight
        pos = table[offset : offset + length] if packed is None else table[packed.positions]
        return x + pos.to(x.dtype)

    def at(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        """x (B, 1, D) plus the position `position`, a (1,) tensor (no host sync: a compiled step's)."""
        if self.kind in ("rotary", "relative"):
            return x
        table = self.table if self.kind == "sinusoidal" else self.learned.weight
        return x + table.index_select(0, position).to(x.dtype)
