"""Search strategies; they use only the model's encode / decode / init_cache and the cache's select."""

from transformer_mt.decoding.beam import BeamSearch
from transformer_mt.decoding.greedy import GreedySearch
from transformer_mt.decoding.sampling import Sampling
from transformer_mt.decoding.search import Hypothesis

__all__ = ["BeamSearch", "GreedySearch", "Hypothesis", "Sampling"]
