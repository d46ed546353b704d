"""Alignments from cross-attention: for each output token, the source token that one decoder layer
attends to most (its heads combined) when it predicts that token.

A teacher-forced pass over the finished outputs (`model.features` under `model.maps.attention_maps`)
gives the attention exactly, whatever search made the outputs; each output token t_j (EOS excluded)
takes the attention row of the step that predicts it (decoder input BOS t_0 ... t_{j-1}), and is
aligned to the argmax over the real source tokens (the source's EOS and padding excluded).
"""

from dataclasses import dataclass

import torch

from transformer_mt.choices import ALIGNMENT_HEADS
from transformer_mt.errors import ConfigError
from transformer_mt.model.maps import attention_maps
from transformer_mt.validate import check, integer, one_of


@dataclass(frozen=True)
class CrossAttentionAligner:
    """`layer`: the decoder layer whose cross-attention aligns (a Python index: -1 is the last);
    `heads`: how its heads combine, mean (their average), max (the largest weight of any head) or a
    head's number."""

    layer: int = -1
    heads: str | int = "mean"

    def check(self, num_layers: int, num_heads: int) -> "CrossAttentionAligner":
        """Itself, if `layer` and `heads` exist in a model of this shape; else a ConfigError naming
        task.alignment_layer or task.alignment_heads."""
        if not (integer(-num_layers)(self.layer) and self.layer < num_layers):
            raise ConfigError(f"task.alignment_layer={self.layer!r}: the model has {num_layers} decoder layers "
                              f"(0 to {num_layers - 1}, or -1 for the last)")
        check("task.alignment_heads", self.heads, lambda v: one_of(*ALIGNMENT_HEADS)(v) or integer(0, num_heads - 1)(v),
              f"mean, max or a head number (0 to {num_heads - 1})")
        return self

    def combine(self, weights: torch.Tensor) -> torch.Tensor:
        """(B, H, T, S) attention probabilities -> (B, T, S) with the heads combined."""
        if self.heads == "mean":
            return weights.mean(dim=1)
        if self.heads == "max":
            return weights.amax(dim=1)
        return weights[:, self.heads]

    @torch.no_grad()
    def __call__(self, model: torch.nn.Module, src: torch.Tensor, outputs: list[list[int]], bos_id: int,
                 eos_id: int) -> list[list[int]]:
        """The source position (into src's row) each token of each output is aligned to; src (B, S)
        padded source ids with their EOS, `outputs` the B outputs' tokens (no BOS, no EOS)."""
        longest = max((len(tokens) for tokens in outputs), default=0)
        if longest == 0:
            return [[] for _ in outputs]
        pad_id = model.config.pad_id
        tgt_in = torch.full((len(outputs), longest), pad_id, dtype=torch.long)
        tgt_in[:, 0] = bos_id
        for row, tokens in enumerate(outputs):
            tgt_in[row, 1 : len(tokens)] = torch.tensor(tokens[:-1], dtype=torch.long)
        with attention_maps(model) as maps:
            model.features(src, tgt_in.to(src.device))
        weights = self.combine(maps.cross[self.layer].float())  # (B, T, S)
        not_aligned = (src == pad_id) | (src == eos_id)  # the source's EOS and padding
        best = weights.masked_fill(not_aligned[:, None, :], float("-inf")).argmax(dim=-1).tolist()
        return [row[: len(tokens)] for row, tokens in zip(best, outputs)]
