"""Greedy search: the most probable token at every step."""

import torch

from transformer_mt.decoding.search import Hypothesis, SearchModel, SearchOptions, token_by_token


class GreedySearch:
    """Pick the most probable token until EOS or the length limit; the rules and how the model runs
    are the `options` every search takes (SearchOptions; check_every None: 1 on the CPU, 8 on a GPU,
    the same search at any value). `prefix_tokens` (B, P), padded with <pad>: each output starts
    with its row's (TargetPrefix)."""

    def __init__(self, options: SearchOptions | None = None) -> None:
        self.options = options or SearchOptions()

    @torch.no_grad()
    def __call__(self, model: SearchModel, src: torch.Tensor, bos_id: int, eos_id: int,
                 prefix_tokens: torch.Tensor | None = None) -> list[list[Hypothesis]]:
        hyps = token_by_token(model, src, bos_id, eos_id, self.options, lambda lprobs: lprobs.argmax(-1),
                              prefix_tokens=prefix_tokens)
        return [[h] for h in hyps]
