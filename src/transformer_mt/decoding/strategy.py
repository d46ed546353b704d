"""What every search declares: the `Search` protocol that greedy search (greedy.py), beam search
(beam.py) and sampling (sampling.py) implement, and the `SearchCapabilities` each declares, which
whoever runs a search (an engine, the server, a task) reads instead of asking for its class."""

from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch

from transformer_mt.decoding.constraints import Phrase
from transformer_mt.decoding.search import Hypothesis, SearchModel, SearchOptions


@dataclass(frozen=True)
class SearchCapabilities:
    """What a search does beyond the best hypothesis of each sentence (every search takes target
    prefixes, its SearchOptions and a shortlist)."""

    nbest: bool = False  # several hypotheses per sentence (decoding.nbest)
    beams: bool = False  # beam_size prefixes, finished ones ranked by length_norm (its beam_size, length_norm)
    random: bool = False  # draws its tokens (its temperature, top_k, top_p, seed): outputs depend on the order
    constraints: bool = False  # phrases every output contains (its decoding.constraints, `unmet`)


class Search(Protocol):
    """A search strategy: each sentence's `nbest` hypotheses (1 where capabilities.nbest is not
    declared), best first, decoded by `options`; `shortlist`: over a vocabulary shortlist
    (search.SHORTLIST)."""

    capabilities: ClassVar[SearchCapabilities]
    options: SearchOptions
    nbest: int
    shortlist: bool

    def __call__(self, model: SearchModel, src: torch.Tensor, bos_id: int, eos_id: int,
                 prefix_tokens: torch.Tensor | None = None, constraints: list[list[Phrase]] | None = None,
                 free_prefix: int = 0) -> list[list[Hypothesis]]:
        """The hypotheses of each row of src (B, S); every one starts with its row of `prefix_tokens`
        (B, P), padded with <pad> (search.TargetPrefix), and contains its row's `constraints`
        (phrases of target ids; a ValueError for a search that does not declare them). The first
        `free_prefix` forced tokens of each row count 0 in its score (a target language's code, as
        generate's forced_bos_token_id and fairseq's language token as the decoder's start)."""
