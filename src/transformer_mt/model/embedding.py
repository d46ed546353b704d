"""Token embeddings scaled by sqrt(d_model), and what the positions add to them (AddedPositions:
the kind's, model/positions.py)."""

import math

import torch
from torch import nn

from transformer_mt.errors import ConfigError
from transformer_mt.packing import Packed


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


class AddedPositions(nn.Module):
    """What the embeddings of positions 0..T-1 (shifted by `offset` during incremental decoding) get
    added: here nothing (positions inside self-attention); a PositionTable adds its rows. A sequence
    longer than `max_positions` is refused either way."""

    def __init__(self, max_positions: int) -> None:
        super().__init__()
        self.max_positions = max_positions

    def forward(self, x: torch.Tensor, offset: int = 0, packed: Packed | None = None) -> torch.Tensor:
        """x (B, T, D), or a packed stream (N, D) with its layout."""
        length = x.size(1) if packed is None else packed.max_length
        if offset + length > self.max_positions:
            raise ConfigError(
                f"sequence of {offset + length} tokens is longer than model.max_positions={self.max_positions}"
            )
        return self.add(x, slice(offset, offset + length) if packed is None else packed.positions)

    def add(self, x: torch.Tensor, index: slice | torch.Tensor) -> torch.Tensor:
        """x plus the positions `index`: a slice of them, or a tensor of them (a packed stream's)."""
        return x

    def at(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        """x (B, 1, D) plus the position `position`, a (1,) tensor (no host sync: a compiled step's)."""
        return x

    def rows(self) -> torch.Tensor | None:
        """The (max_positions, D) table whose rows are added (the CTranslate2 export's); None: none."""
        return None


class PositionTable(AddedPositions):
    """Adds the rows of its table, `rows()`, at the tokens' positions."""

    def add(self, x: torch.Tensor, index: slice | torch.Tensor) -> torch.Tensor:
        return x + self.rows()[index].to(x.dtype)

    def at(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        return x + self.rows().index_select(0, position).to(x.dtype)
