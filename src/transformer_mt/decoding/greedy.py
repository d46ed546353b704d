"""Greedy search: the most probable token at every step."""

import torch

from transformer_mt.decoding.search import (
    Hypothesis,
    SearchModel,
    SearchOptions,
    TokenRun,
    run_search,
)
from transformer_mt.decoding.strategy import Phrase, Search, SearchCapabilities


class GreedySearch(Search):
    """Pick the most probable token until EOS or the length limit; the rules and how the model runs
    are the `options` every search takes (SearchOptions; check_every None: 1 on the CPU, 8 on a GPU,
    the same search at any value). `prefix_tokens` (B, P), padded with <pad>: each output starts
    with its row's (TargetPrefix). `shortlist`: over a vocabulary shortlist (search.SHORTLIST)."""

    capabilities = SearchCapabilities()  # one hypothesis per sentence, no constraints
    nbest = 1

    def __init__(self, options: SearchOptions | None = None, shortlist: bool = False) -> None:
        self.options = options or SearchOptions()
        self.shortlist = shortlist

    @torch.no_grad()
    def __call__(self, model: SearchModel, src: torch.Tensor, bos_id: int, eos_id: int,
                 prefix_tokens: torch.Tensor | None = None, constraints: list[list[Phrase]] | None = None,
                 free_prefix: int = 0) -> list[list[Hypothesis]]:
        if any(constraints or []):
            raise ValueError("greedy search takes no constraints (beam search does)")

        def begin(rows: int, steps: int, device: torch.device) -> TokenRun:
            return TokenRun(rows, steps, device, lambda lprobs: lprobs.argmax(-1), eos_id)

        return run_search(model, src, bos_id, eos_id, self.options, begin, prefix_tokens=prefix_tokens,
                          free_prefix=free_prefix)
