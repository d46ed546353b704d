"""Search strategies; they use only the model's encode / decode / init_cache / reorder_cache."""

from transformer_mt.decoding.greedy import GreedySearch
from transformer_mt.decoding.search import Hypothesis

__all__ = ["GreedySearch", "Hypothesis"]
