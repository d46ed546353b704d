"""Ensembles: several models searched as one (ckpt_path=[a.ckpt,b.ckpt,...]), by fairseq's rule:
at every step the log of the members' mean probability,

    log p(y | x, prefix) = logsumexp_m(log p_m(y | x, prefix)) - log M.

`Ensemble` is a SearchModel (search.py), so greedy search, beam search and sampling run it as
they run one model: its memory is the members' memories side by side on the feature axis (one
tensor, so a search's row selection moves every member's rows at once), its cache holds one cache
per member. `forward` gives the same averaged log-probabilities for teacher-forced scoring.
"""

import functools
import math
from dataclasses import dataclass

import torch

from transformer_mt.decoding.search import SearchCache, SearchModel


def mean_of_probabilities(lprobs: list[torch.Tensor]) -> torch.Tensor:
    """log(mean_m exp(lprobs_m)) of the members' log-probabilities (fp32): pairwise logaddexp,
    one elementwise pass per member (no stacked copy), then - log M. Without autograd the result
    is written over the first member's tensor (which the caller gives up): on a CPU, fresh pages
    every step cost more than the pass."""
    if len(lprobs) == 1:
        return lprobs[0]
    if torch.is_grad_enabled():
        return functools.reduce(torch.logaddexp, lprobs) - math.log(len(lprobs))
    total = functools.reduce(lambda a, b: torch.logaddexp(a, b, out=a), lprobs)
    return total.sub_(math.log(len(lprobs)))


def log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """A member's fp32 log-probabilities; without autograd written over its fp32 logits (a member's
    fresh output, which nothing else holds)."""
    logits = logits.float()
    return logits.log_softmax(dim=-1) if torch.is_grad_enabled() else torch.log_softmax(logits, -1, out=logits)


class EnsembleCache:
    """One incremental-decoding cache per member, selected together."""

    def __init__(self, caches: list[SearchCache]) -> None:
        self.caches = caches

    def select(self, index: torch.Tensor, memory_index: torch.Tensor | None = None) -> None:
        for cache in self.caches:
            cache.select(index, memory_index)


@dataclass(frozen=True)
class EnsembleConfig:
    """What a search reads of a model's config: the members' pad id, their shortest max_positions."""

    pad_id: int
    max_positions: int


class Ensemble:
    """Members that share a target vocabulary, searched as one model (see the module's docstring).
    Members are Transformers (their config says d_model, pad_id and max_positions). Its decode
    gives log-probabilities (`normalized`): a search takes them as they are (a log-softmax over
    them again would cost a pass over the vocabulary per step and change nothing)."""

    normalized = True
    fixed_rows = False

    def __init__(self, members: list[SearchModel]) -> None:
        if not members:
            raise ValueError("an ensemble needs at least one model")
        pad_ids = {m.config.pad_id for m in members}
        if len(pad_ids) != 1:
            raise ValueError(f"the members of an ensemble must share their pad id, got {sorted(pad_ids)}")
        self.members = members
        self.config = EnsembleConfig(pad_ids.pop(), min(m.config.max_positions for m in members))
        self.widths = [m.config.d_model for m in members]  # of each member's memory

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """(N, S) -> the members' memories side by side, (N, S, sum of their widths)."""
        return torch.cat([member.encode(src) for member in self.members], dim=-1)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor,
               cache: EnsembleCache | None = None) -> torch.Tensor:
        """The averaged log-probabilities (N, T, V), fp32."""
        parts = memory.split(self.widths, dim=-1)
        lprobs = [log_softmax(member.decode(tgt, part, src, cache=None if cache is None else cache.caches[i]))
                  for i, (member, part) in enumerate(zip(self.members, parts))]
        return mean_of_probabilities(lprobs)

    def init_cache(self, capacity: int | None = None, beams: int = 1, store: bool = True) -> EnsembleCache:
        return EnsembleCache([member.init_cache(capacity, beams, store) for member in self.members])

    def __call__(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced averaged log-probabilities (B, T, V), where a model's forward gives logits
        (whose log-softmax they equal)."""
        return mean_of_probabilities([log_softmax(member(src, tgt_in)) for member in self.members])
