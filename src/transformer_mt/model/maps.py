"""Attention maps: the attention probabilities of a model's forward passes, for plots and alignments.

    with attention_maps(model) as maps:
        model.features(src, tgt_in)
    maps.cross[-1]  # the last decoder layer's cross-attention, (B, H, T, S)

Inside the block every attention module computes its probabilities explicitly (the same outputs as
SDPA) and records them; outside it, attention runs SDPA's fused kernels and records nothing.
"""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from transformer_mt.model.attention import MultiHeadAttention
from transformer_mt.model.layers import DecoderLayer, EncoderLayer


@dataclass
class AttentionMaps:
    """Attention probabilities (B, H, T, S), one tensor per attention call in the order of the calls
    (a forward pass: one per layer, first layer first; incremental decoding: one per step and layer)."""

    encoder: list[torch.Tensor] = field(default_factory=list)  # encoder self-attention
    decoder_self: list[torch.Tensor] = field(default_factory=list)  # decoder self-attention
    cross: list[torch.Tensor] = field(default_factory=list)  # decoder over the encoder memory


@contextlib.contextmanager
def attention_maps(model: nn.Module) -> Iterator[AttentionMaps]:
    """Record the attention probabilities of `model` (a Transformer, a layer or an attention module)
    within the block. An attention module outside a layer records into `cross` if it is
    cross-attention, else into `encoder`."""
    maps = AttentionMaps()
    targets: dict[MultiHeadAttention, list[torch.Tensor]] = {}
    for module in model.modules():
        if isinstance(module, EncoderLayer):
            targets[module.self_attn] = maps.encoder
        elif isinstance(module, DecoderLayer):
            targets[module.self_attn], targets[module.cross_attn] = maps.decoder_self, maps.cross
    for module in model.modules():
        if isinstance(module, MultiHeadAttention) and module not in targets:
            targets[module] = maps.cross if module.cross else maps.encoder
    for module, recorded in targets.items():
        module.maps = recorded
    try:
        yield maps
    finally:
        for module in targets:
            module.maps = None
