"""Greedy search: the most probable token at every step."""

import torch

from transformer_mt.decoding.search import Hypothesis, Rules, SearchModel, token_by_token
from transformer_mt.model.quantize import check_quantize


class GreedySearch:
    """Pick the most probable token until EOS or the length limit (max_len_a * src_len + max_len_b
    tokens, then EOS is forced). EOS is banned before min_len tokens; no_repeat_ngram_size > 0
    bans any n-gram from occurring twice. quantize=int8: run on an int8 copy of the model (which
    the caller, TranslationModule, makes; CPU)."""

    def __init__(self, max_len_a: float = 1.2, max_len_b: int = 10, min_len: int = 0,
                 no_repeat_ngram_size: int = 0, use_cache: bool = True, quantize: str = "none") -> None:
        self.quantize = check_quantize(quantize)
        self.rules = Rules(max_len_a, max_len_b, min_len, no_repeat_ngram_size)
        self.use_cache = use_cache

    @torch.no_grad()
    def __call__(self, model: SearchModel, src: torch.Tensor, bos_id: int, eos_id: int) -> list[list[Hypothesis]]:
        hyps = token_by_token(model, src, bos_id, eos_id, self.rules, lambda lprobs: lprobs.argmax(-1),
                              use_cache=self.use_cache)
        return [[h] for h in hyps]
