"""Hand-built models with known next-token probabilities, exposing the model API that decoding
uses (config, encode, decode, init_cache and its cache's select)."""

import math
from types import SimpleNamespace

import torch

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4


class MarkovModel:
    """P(next | previous token, table chosen by the first source token). Records every prefix it
    is asked to extend, so tests can check that finished hypotheses are never extended."""

    normalized = False  # its log-probabilities go through the search's log-softmax, as logits do
    fixed_rows = False

    def __init__(self, tables: dict[int, dict[int, dict[int, float]]], vocab: int = 5, max_positions: int = 64):
        self.config = SimpleNamespace(pad_id=PAD, max_positions=max_positions)
        self.vocab = vocab
        self.logits = torch.full((max(tables) + 1, vocab, vocab), float("-inf"))
        for table_id, table in tables.items():
            for prev, row in table.items():
                for tok, p in row.items():
                    self.logits[table_id, prev, tok] = math.log(p)
        self.seen_prefixes: list[list[int]] = []

    def encode(self, src):
        return src[:, :1].float()[:, :, None]  # the memory only says which table to use

    def decode(self, tgt, memory, src, cache=None):
        beams = 1 if cache is None else cache.beams
        if tgt.size(0) != beams * src.size(0):
            raise ValueError(f"{tgt.size(0)} prefixes for {src.size(0)} source rows with beams={beams}")
        if cache is not None and cache.store:
            prefix = torch.cat([tgt[:, :0] if cache.prefix is None else cache.prefix, tgt], dim=1)
            cache.prefix = prefix
        else:
            prefix = tgt
        self.seen_prefixes.extend(prefix.tolist())
        table = src[:, :1].repeat_interleave(beams, dim=0)  # beams share their source row
        return self.logits[table, tgt]  # (N, T, V)

    def init_cache(self, capacity=None, beams=1, store=True):
        return PrefixCache(beams, store)  # the prefix grows by concatenation: a toy needs no capacity


class PrefixCache:
    """The toy's cache: the beam layout, and the prefixes decoded so far (store=False: none)."""

    def __init__(self, beams=1, store=True):
        self.beams, self.store, self.prefix = beams, store, None

    def select(self, index, memory_index=None):
        if self.prefix is not None:
            self.prefix = self.prefix.index_select(0, index)


# Table 1: greedy goes a, a, a, ... while the best sequences start with b.
TABLE_1 = {
    BOS: {A: 0.5, B: 0.4, EOS: 0.1},
    A: {A: 0.45, B: 0.3, EOS: 0.25},
    B: {EOS: 0.5, A: 0.25, B: 0.25},
}
# Table 2: a different language, for checking that batched sentences never mix.
TABLE_2 = {
    BOS: {B: 0.7, A: 0.2, EOS: 0.1},
    A: {EOS: 0.6, A: 0.2, B: 0.2},
    B: {A: 0.5, EOS: 0.3, B: 0.2},
}
