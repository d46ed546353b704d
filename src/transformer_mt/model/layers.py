"""Position-wise feed-forward network, encoder layer and decoder layer (post-norm or pre-norm)."""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from transformer_mt.model.attention import AttentionPositions, MultiHeadAttention
from transformer_mt.model.cache import LayerCache
from transformer_mt.packing import Varlen

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}


class FeedForward(nn.Module):
    """FFN(x) = W2 act(W1 x + b1) + b2, applied to every position alike."""

    def __init__(self, d_model: int, d_ff: int, activation: str, activation_dropout: float) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]
        self.dropout = nn.Dropout(activation_dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class Residual(nn.Module):
    """Residual connection with dropout and LayerNorm, after the sub-layer (post-norm, the paper's
    "Add & Norm") or before it (pre-norm): block(x, sublayer)."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention over the source, then the FFN."""

    def __init__(self, d_model, heads, d_k, d_ff, dropout, attention_dropout, activation_dropout,
                 activation, norm_first, positions: AttentionPositions | None = None) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads, d_k, attention_dropout, positions=positions)
        self.ffn = FeedForward(d_model, d_ff, activation, activation_dropout)
        self.attn_block = Residual(d_model, dropout, norm_first)
        self.ffn_block = Residual(d_model, dropout, norm_first)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | Varlen) -> torch.Tensor:
        """x (B, S, D) -> (B, S, D); src_mask (B, 1, 1, S), True at real tokens. Packed: x (N, D)
        and the source's Varlen layout."""
        x = self.attn_block(x, lambda h: self.self_attn(h, mask=src_mask))
        return self.ffn_block(x, self.ffn)


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention over the encoder memory, then the FFN."""

    def __init__(self, d_model, heads, d_k, d_ff, dropout, attention_dropout, activation_dropout,
                 activation, norm_first, positions: AttentionPositions | None = None) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads, d_k, attention_dropout, positions=positions)
        self.cross_attn = MultiHeadAttention(d_model, heads, d_k, attention_dropout, cross=True)
        self.ffn = FeedForward(d_model, d_ff, activation, activation_dropout)
        self.self_block = Residual(d_model, dropout, norm_first)
        self.cross_block = Residual(d_model, dropout, norm_first)
        self.ffn_block = Residual(d_model, dropout, norm_first)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | Varlen,
                cache: LayerCache | None = None, self_mask: Varlen | None = None) -> torch.Tensor:
        """x (B, T, D) -> (B, T, D). Self-attention is causal, except for the one new position of
        a decoding step, which attends to the cached ones. memory has B / beams rows, `beams` the
        cache's: `beams` consecutive rows of x share one (see MultiHeadAttention). Packed: x (Nt, D), memory (Ns, D),
        self_mask the target's Varlen layout and memory_mask the target's over the source's."""
        self_cache, cross_cache = (None, None) if cache is None else (cache.self_attn, cache.cross_attn)
        causal = self_cache is None or x.size(1) > 1
        x = self.self_block(x, lambda h: self.self_attn(h, mask=self_mask, is_causal=causal, cache=self_cache))
        x = self.cross_block(x, lambda h: self.cross_attn(h, memory, memory_mask, cache=cross_cache))
        return self.ffn_block(x, self.ffn)
