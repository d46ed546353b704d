"""The lexical table of a vocabulary shortlist (data/lexical.py), by hand on a tiny corpus: the
co-occurrence counts (each token once per sentence pair, specials left out), the Dice and p(t|s)
rankings, the frequent target tokens kept out of the candidates, the cut at K; and counting the
corpus in chunks gives the counts of counting it at once."""

import numpy as np
import pytest

from transformer_mt.data.lexical import Cooccurrence, lexical_table
from transformer_mt.errors import ConfigError

SPECIALS = np.array([0, 1, 2, 3])
# three pairs: source ids (EOS 2 last) -> target ids
PAIRS = [([5, 6, 5, 2], [7, 8, 7]), ([5, 2], [8]), ([6, 2], [8, 9])]


def counted(pairs=PAIRS, chunk: int = len(PAIRS)) -> Cooccurrence:
    counts = Cooccurrence(10, 12, SPECIALS)
    for start in range(0, len(pairs), chunk):
        part = pairs[start : start + chunk]
        counts.add(np.array([t for s, _ in part for t in s]), np.array([len(s) for s, _ in part]),
                   np.array([t for _, t in part for t in t]), np.array([len(t) for _, t in part]))
    counts.merge()
    return counts


def test_counts_are_sentence_pairs_holding_both_tokens_each_counted_once():
    counts = counted()
    assert counts.pairs == 3
    assert counts.src.tolist() == [0, 0, 0, 0, 0, 2, 2, 0, 0, 0]  # 5 in pairs 0 and 1 (twice in 0: once), 6 in 0, 2
    assert counts.tgt.tolist() == [0] * 7 + [1, 3, 1, 0, 0]  # sentence pairs holding each target token
    assert counts.tokens.tolist() == [0] * 7 + [2, 3, 1, 0, 0]  # every occurrence: 7 twice in pair 0
    joint = {(int(k) // 12, int(k) % 12): int(c) for k, c in zip(counts.keys, counts.joint)}
    assert joint == {(5, 7): 1, (5, 8): 2, (6, 7): 1, (6, 8): 2, (6, 9): 1}  # EOS (2) counts with nothing


def test_dice_and_probability_rank_by_hand_beyond_the_frequent_tokens():
    counts = counted()
    # dice = 2 c(s,t) / (c(s) + c(t)): 5 -> 8 (4/5) before 7 (2/3); 6 -> 8 (4/5), then 7 and 9 (2/3: the
    # smaller id first)
    dice = lexical_table(counts, k=2, frequent=0, scoring="dice")
    assert dice.candidates[5].tolist() == [8, 7] and dice.candidates[6].tolist() == [8, 7]
    assert dice.frequent.tolist() == [] and dice.pairs == 3
    assert (dice.candidates[[0, 1, 2, 3, 4, 7, 8, 9]] == -1).all()  # no candidates for what never occurred
    # the most frequent target token (8: 3 occurrences) is always a row: the candidates go beyond it
    probability = lexical_table(counts, k=3, frequent=1)  # the default scoring
    assert probability.frequent.tolist() == [8]
    # p(t|s) = c(s,t) / c(s): 5 -> 7 (1/2); 6 -> 7 and 9 (1/2 each)
    assert probability.candidates[5].tolist() == [7, -1, -1] and probability.candidates[6].tolist() == [7, 9, -1]
    assert lexical_table(counts, k=1, frequent=5).frequent.tolist() == [8, 7, 9]  # only tokens that occur


def test_counting_in_chunks_equals_counting_at_once():
    rng = np.random.default_rng(0)
    pairs = [(rng.integers(4, 10, rng.integers(1, 6)).tolist() + [2], rng.integers(4, 12, rng.integers(1, 6)).tolist())
             for _ in range(50)]
    whole, chunked = counted(pairs), counted(pairs, chunk=7)
    for name in ("src", "tgt", "tokens", "keys", "joint"):
        assert np.array_equal(getattr(whole, name), getattr(chunked, name)), name
    by_hand = {}
    for src, tgt in pairs:
        for s in set(src) - {2}:
            for t in set(tgt):
                by_hand[s, t] = by_hand.get((s, t), 0) + 1
    assert {(int(k) // 12, int(k) % 12): int(c) for k, c in zip(whole.keys, whole.joint)} == by_hand


@pytest.mark.parametrize("kwargs, message", [(dict(k=0, frequent=1), "task.candidates=0: must be an integer >= 1"),
                                             (dict(k=1, frequent=-1), "task.frequent=-1: must be"),
                                             (dict(k=1, frequent=1, scoring="pmi"), "task.scoring='pmi': must be")])
def test_bad_sizes_name_their_key(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        lexical_table(counted(), **kwargs)
