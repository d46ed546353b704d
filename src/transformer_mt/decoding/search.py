"""What every search strategy shares: the hypothesis type and the length limit."""

from dataclasses import dataclass

import torch


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # sum of token log-probabilities (EOS included)


def max_lengths(src: torch.Tensor, pad_id: int, a: float, b: int, max_positions: int) -> torch.Tensor:
    """Per-sentence limit on output tokens: a * src_len + b, kept inside the position table."""
    src_len = (src != pad_id).sum(dim=1)
    return (a * src_len + b).long().clamp(min=1, max=max_positions - 1)
