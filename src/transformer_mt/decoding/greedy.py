"""Greedy search: the most probable token at every step."""

import torch

from transformer_mt.decoding.search import Hypothesis, Rules, SearchModel, token_by_token
from transformer_mt.model.quantize import check_quantize


class GreedySearch:
    """Pick the most probable token until EOS or the length limit (max_len_a * src_len + max_len_b
    tokens, then EOS is forced). EOS is banned before min_len tokens; no_repeat_ngram_size > 0
    bans any n-gram from occurring twice. quantize=int8: run on an int8 copy of the model (which
    the caller, TranslationModule, makes; CPU). check_every: steps between the host's looks at
    which sentences ended (None: 1 on the CPU, 8 on a GPU; see search.check_interval); the search
    is the same at any value (as BeamSearch's)."""

    def __init__(self, max_len_a: float = 1.2, max_len_b: int = 10, min_len: int = 0,
                 no_repeat_ngram_size: int = 0, use_cache: bool = True, quantize: str = "none",
                 check_every: int | None = None) -> None:
        self.quantize = check_quantize(quantize)
        self.rules = Rules(max_len_a, max_len_b, min_len, no_repeat_ngram_size)
        self.use_cache, self.check_every = use_cache, check_every

    @torch.no_grad()
    def __call__(self, model: SearchModel, src: torch.Tensor, bos_id: int, eos_id: int) -> list[list[Hypothesis]]:
        hyps = token_by_token(model, src, bos_id, eos_id, self.rules, lambda lprobs: lprobs.argmax(-1),
                              use_cache=self.use_cache, check_every=self.check_every)
        return [[h] for h in hyps]
