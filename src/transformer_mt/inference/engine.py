"""What every engine declares (task.engine): the `Engine` protocol that ours (translator.py's
Translator) and CTranslate2's (ct2_engine.py's Ct2Translator) implement, which `translate_lines`
(line_translation.py) and the tasks decode through, and the `EngineCapabilities` each declares,
which the refusals read (ct2_engine.check_engine, before any work) instead of asking for its class."""

from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch

from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.decoding.constraints import Phrase
from transformer_mt.decoding.search import Hypothesis
from transformer_mt.decoding.strategy import Search


@dataclass(frozen=True)
class EngineCapabilities:
    """What an engine does beyond one checkpoint decoded by its search (n-best, target prefixes, a
    shortlist and scores: every engine)."""

    ensembles: bool  # several checkpoints' members searched as one (ckpt_path=[a,b])
    alignments: bool  # Pharaoh alignments from our model's cross-attention (task.alignment; a Translator's members)
    constraints: bool  # constrained beam search (decoding.constraints)
    any_length_norm: bool  # beam search ranks by any length norm (False: fairseq's PowerLength only)


class Engine(Protocol):
    """Token ids in, hypotheses out, with what reading, fitting and batching lines need: the
    tokenizer, the special ids, the longest sequence, the device the batches go to, the search."""

    capabilities: ClassVar[EngineCapabilities]
    tokenizer: Vocabularies
    search: Search  # the configured decoding
    pad_id: int
    bos_id: int
    eos_id: int
    device: torch.device  # where the batches' ids go
    max_positions: int  # the longest sequence it takes

    def hypotheses(self, src: torch.Tensor, search: Search | None = None, prefix_tokens: torch.Tensor | None = None,
                   constraints: list[list[Phrase]] | None = None, free_prefix: int = 0) -> list[list[Hypothesis]]:
        """The n-best of each row of src (B, S, EOS last), best first, by `search` (None: the
        engine's); each starts with its row of `prefix_tokens` (B, P, padded with <pad>) and
        contains its row's `constraints` (capabilities.constraints; None: none); the first
        `free_prefix` prefix tokens (a target language's code) count 0 in the score."""

    def with_search(self, search: Search) -> "Engine":
        """The same engine (its weights shared) decoding with `search` by default (a server's request)."""
