"""Position-wise feed-forward network, encoder layer and decoder layer (post-norm or pre-norm)."""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from transformer_mt.errors import ConfigError
from transformer_mt.model.attention import MultiHeadAttention

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}


class FeedForward(nn.Module):
    """FFN(x) = W2 act(W1 x + b1) + b2, applied to every position alike."""

    def __init__(self, d_model: int, d_ff: int, activation: str, activation_dropout: float) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ConfigError(f"model.activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]
        self.dropout = nn.Dropout(activation_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class Residual(nn.Module):
    """Residual connection with dropout and LayerNorm, after the sub-layer (post-norm, the paper)
    or before it (pre-norm). A block reads as two steps around its sub-layer:

        out = sublayer(block.sublayer_input(x))
        x = block.combine(x, out)
    """

    def __init__(self, d_model: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def sublayer_input(self, x: torch.Tensor) -> torch.Tensor:
        """What the sub-layer sees: LayerNorm(x) with pre-norm, x itself with post-norm."""
        return self.norm(x) if self.norm_first else x

    def combine(self, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """The block's output from its input x and the sub-layer's output: x + dropout(out), then
        LayerNorm with post-norm (the paper's "Add & Norm")."""
        if self.norm_first:
            return x + self.dropout(out)
        return self.norm(x + self.dropout(out))

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """The block around a sub-layer that returns one tensor (the FFN)."""
        return self.combine(x, sublayer(self.sublayer_input(x)))


class EncoderLayer(nn.Module):
    """Self-attention over the source, then the FFN."""

    def __init__(self, d_model, heads, d_k, d_ff, dropout, attention_dropout, activation_dropout,
                 activation, norm_first) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads, d_k, attention_dropout)
        self.ffn = FeedForward(d_model, d_ff, activation, activation_dropout)
        self.attn_block = Residual(d_model, dropout, norm_first)
        self.ffn_block = Residual(d_model, dropout, norm_first)

    def forward(
        self, x: torch.Tensor, src_mask: torch.Tensor, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, S, D) -> (output (B, S, D), self-attention weights (B, H, S, S) or None)."""
        out, weights = self.self_attn(self.attn_block.sublayer_input(x), mask=src_mask, need_weights=need_weights)
        x = self.attn_block.combine(x, out)
        x = self.ffn_block(x, self.ffn)
        return x, weights


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention over the encoder memory, then the FFN."""

    def __init__(self, d_model, heads, d_k, d_ff, dropout, attention_dropout, activation_dropout,
                 activation, norm_first) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads, d_k, attention_dropout)
        self.cross_attn = MultiHeadAttention(d_model, heads, d_k, attention_dropout, cross=True)
        self.ffn = FeedForward(d_model, d_ff, activation, activation_dropout)
        self.self_block = Residual(d_model, dropout, norm_first)
        self.cross_block = Residual(d_model, dropout, norm_first)
        self.ffn_block = Residual(d_model, dropout, norm_first)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None,
        memory_mask: torch.Tensor,
        cache: dict | None = None,
        need_weights: bool = False,
        beams: int = 1,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor | None]]:
        """x (B, T, D) -> (output (B, T, D), {"self": weights or None, "cross": weights or None}).

        self_mask None means plain causal attention. cache: {"self": {}, "cross": {}}. memory has
        B / beams rows: `beams` consecutive rows of x share one (see MultiHeadAttention).
        """
        out, self_weights = self.self_attn(
            self.self_block.sublayer_input(x), mask=self_mask,
            is_causal=self_mask is None and (cache is None or x.size(1) > 1),
            cache=None if cache is None else cache["self"], need_weights=need_weights,
        )
        x = self.self_block.combine(x, out)
        out, cross_weights = self.cross_attn(
            self.cross_block.sublayer_input(x), memory=memory, mask=memory_mask,
            cache=None if cache is None else cache["cross"], need_weights=need_weights, beams=beams,
        )
        x = self.cross_block.combine(x, out)
        x = self.ffn_block(x, self.ffn)
        return x, {"self": self_weights, "cross": cross_weights}
