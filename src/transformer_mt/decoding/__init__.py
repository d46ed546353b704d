"""Search strategies; they use only the model's encode / decode / init_cache and the cache's select.
Every search takes a SearchOptions (the rules its outputs obey, how it runs the model), and may be
given target prefixes its outputs start with (`prefix_tokens`: search.TargetPrefix); each is a
strategy.Search and declares what it can do (strategy.SearchCapabilities). Alignments from the
cross-attention of finished outputs: alignment.CrossAttentionAligner."""

from transformer_mt.decoding.beam import BeamSearch, GnmtLength, PowerLength
from transformer_mt.decoding.greedy import GreedySearch
from transformer_mt.decoding.sampling import Sampling
from transformer_mt.decoding.search import Hypothesis, SearchOptions

__all__ = ["BeamSearch", "GnmtLength", "GreedySearch", "Hypothesis", "PowerLength", "Sampling", "SearchOptions"]
