"""Sampling with temperature, top-k and nucleus (top-p) filtering."""

import torch

from transformer_mt.decoding.search import (
    Hypothesis,
    SearchModel,
    SearchOptions,
    TokenRun,
    run_search,
)
from transformer_mt.decoding.strategy import Phrase, Search, SearchCapabilities


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row (k <= 0 keeps all); the rest become -inf."""
    if k <= 0 or k >= logits.size(-1):
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of most probable tokens whose probability mass reaches p."""
    if p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # mass of the tokens ranked above each one
    drop_sorted = mass_before >= p  # already reached p without this token
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def multinomial(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row of probs (N, V), drawn as torch.multinomial(probs, 1) draws it (the same
    random numbers, the same tokens): argmax(probs / q), q ~ Exp(1). Without its checks of probs,
    each a host sync (a row of NaN, as an ended row may have, picks some token)."""
    q = torch.empty_like(probs).exponential_(1.0, generator=generator)
    return (probs / q).argmax(dim=-1)


class Sampling(Search):
    """Draw each token from the model's distribution, sharpened by temperature and restricted to
    the top_k tokens and / or the top_p nucleus. `nbest` independent samples per sentence, ranked
    by their log-probability under the model; `seed` makes the draws reproducible. The rules and how
    the model runs are the `options` every search takes (SearchOptions); `prefix_tokens` (B, P),
    padded with <pad>: every sample starts with its row's (TargetPrefix; a forced step still draws,
    from a distribution with one token).

    options.check_every: steps between the host's looks at which samples ended (see
    search.check_interval). A step draws one random row per row of the batch, so the draws depend
    on when ended rows leave it: None (here 1) gives each seed the samples it always gave (one host
    sync per step, where torch.multinomial took three); a larger value gives other samples, as
    reproducible. `shortlist`: over a vocabulary shortlist (search.SHORTLIST; the draws then differ
    from those over the whole vocabulary)."""

    capabilities = SearchCapabilities(nbest=True, random=True)

    def __init__(self, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int | None = None,
                 nbest: int = 1, options: SearchOptions | None = None, shortlist: bool = False) -> None:
        self.temperature, self.top_k, self.top_p, self.seed, self.nbest = temperature, top_k, top_p, seed, nbest
        self.options = options or SearchOptions()
        self.shortlist = shortlist

    def distribution(self, lprobs: torch.Tensor) -> torch.Tensor:
        """The probabilities tokens are drawn from, given the model's log-probabilities."""
        logits = top_p_filter(top_k_filter(lprobs / self.temperature, self.top_k), self.top_p)
        return logits.softmax(dim=-1)

    @torch.no_grad()
    def __call__(self, model: SearchModel, src: torch.Tensor, bos_id: int, eos_id: int,
                 prefix_tokens: torch.Tensor | None = None, constraints: list[list[Phrase]] | None = None,
                 free_prefix: int = 0) -> list[list[Hypothesis]]:
        if any(constraints or []):
            raise ValueError("sampling takes no constraints (beam search does)")
        generator = None if self.seed is None else torch.Generator(device=src.device).manual_seed(self.seed)

        def draw(lprobs: torch.Tensor) -> torch.Tensor:
            return multinomial(self.distribution(lprobs), generator)

        def begin(rows: int, steps: int, device: torch.device) -> TokenRun:
            return TokenRun(rows, steps, device, draw, eos_id, copies=self.nbest)

        return run_search(model, src, bos_id, eos_id, self.options, begin, copies=self.nbest, default_check_every=1,
                          prefix_tokens=prefix_tokens, free_prefix=free_prefix)
