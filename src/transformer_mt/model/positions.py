"""Positions, one object per kind (model.positional): `position_kind` picks it once per model,
from its config, and is the one place that names the kinds. What the model asks of it:

    kind.table()            the embeddings' AddedPositions (src_pos, tgt_pos): a table's rows, or nothing
    kind.self_attention()   a self-attention's AttentionPositions: rotary.py's (one table, shared),
                            relative.py's (one per layer), or plain attention
    kind.ct2_options()      the CTranslate2 encoder and decoder specs' arguments (interop/ctranslate2.py)

Parameters stay where checkpoints have them: `src_pos.learned`, `...self_attn.relative`."""

import math

import torch
from torch import nn

from transformer_mt.model.attention import AttentionPositions
from transformer_mt.model.embedding import AddedPositions, PositionTable, sinusoid_table
from transformer_mt.model.relative import RelativePositions
from transformer_mt.model.rotary import BASE as ROTARY_BASE
from transformer_mt.model.rotary import Rotary


class FixedTable(PositionTable):
    """A table of fixed rows (a buffer, not in checkpoints): the paper's sinusoids, or fairseq's."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__(table.size(0))
        self.register_buffer("table", table, persistent=False)

    def rows(self) -> torch.Tensor:
        return self.table


FAIRSEQ_FIRST = 2  # fairseq's first position: <pad> (1) + 1


def fairseq_table(max_positions: int, d_model: int) -> torch.Tensor:
    """fairseq's sinusoids (M2M-100's, NLLB's, as transformers builds them): the sines of d_model / 2
    frequencies 10000^(-i / (d_model / 2 - 1)), then their cosines (an odd d_model: a zero feature
    last), for positions FAIRSEQ_FIRST, FAIRSEQ_FIRST + 1, ...: our row t is their position t + 2."""
    half = d_model // 2
    frequencies = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(10000) / (half - 1)))
    angles = torch.arange(FAIRSEQ_FIRST, FAIRSEQ_FIRST + max_positions, dtype=torch.int64).float()[:, None] \
        * frequencies[None]
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    return torch.cat([table, torch.zeros(max_positions, d_model % 2)], dim=1)


class LearnedTable(PositionTable):
    """A learned embedding of each position (Table 3, row E)."""

    def __init__(self, max_positions: int, d_model: int) -> None:
        super().__init__(max_positions)
        self.learned = nn.Embedding(max_positions, d_model)

    def rows(self) -> torch.Tensor:
        return self.learned.weight


class PositionKind:
    """A kind of positions for a model of the given shape: this base adds none to the embeddings
    and none in attention; each kind overrides what it does."""

    attention_passes = 1  # how many times self-attention's scores and sums are computed (model/flops.py)

    def __init__(self, max_positions: int, d_model: int, d_k: int, max_relative_positions: int) -> None:
        self.max_positions, self.d_model, self.d_k = max_positions, d_model, d_k
        self.max_relative_positions = max_relative_positions

    def table(self) -> AddedPositions:
        """What the embeddings of a stack get added (a new module for each stack)."""
        return AddedPositions(self.max_positions)

    def self_attention(self) -> AttentionPositions:
        """What one self-attention does with positions (asked once per layer)."""
        return AttentionPositions()

    def ct2_options(self) -> dict:
        """CTranslate2's encoder and decoder spec arguments: none for a table (its position_encodings)."""
        return {}


class SinusoidalKind(PositionKind):
    def table(self) -> AddedPositions:
        return FixedTable(sinusoid_table(self.max_positions, self.d_model))


class FairseqKind(PositionKind):
    def table(self) -> AddedPositions:
        return FixedTable(fairseq_table(self.max_positions, self.d_model))


class LearnedKind(PositionKind):
    def table(self) -> AddedPositions:
        return LearnedTable(self.max_positions, self.d_model)


class RotaryKind(PositionKind):
    """RoPE in every self-attention, from one table of angles built here."""

    def __init__(self, max_positions: int, d_model: int, d_k: int, max_relative_positions: int) -> None:
        super().__init__(max_positions, d_model, d_k, max_relative_positions)
        self.rotary = Rotary(d_k, max_positions)

    def self_attention(self) -> AttentionPositions:
        return self.rotary

    def ct2_options(self) -> dict:
        """Over the whole head (rotary_dim 0), dimensions (i, i + d/2) together (not interleaved), our base."""
        return {"rotary_dim": 0, "rotary_interleave": False, "rotary_base": ROTARY_BASE}


class RelativeKind(PositionKind):
    """Distance embeddings of each self-attention's own (Shaw et al. 2018)."""

    attention_passes = 2  # the distance terms: a second product for the scores and one for the sums

    def self_attention(self) -> AttentionPositions:
        return RelativePositions(self.d_k, self.max_relative_positions)

    def ct2_options(self) -> dict:
        return {"relative_position": True}


KINDS: dict[str, type[PositionKind]] = {"sinusoidal": SinusoidalKind, "learned": LearnedKind, "rotary": RotaryKind,
                                        "relative": RelativeKind, "fairseq": FairseqKind}  # model.positional


def position_kind(positional: str, max_positions: int, d_model: int, d_k: int,
                  max_relative_positions: int) -> PositionKind:
    """The object of kind `positional` (model.positional: one of choices.POSITIONS, the schema's) for a model of
    this shape."""
    return KINDS[positional](max_positions, d_model, d_k, max_relative_positions)
