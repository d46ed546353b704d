"""data/mixture.py: what an epoch shows of each training corpus (weights, a temperature), and the
text a joint vocabulary is trained on when corpora are mixed."""

import numpy as np
import pytest

from transformer_mt.data.batching import TokenBudgetBatchSampler
from transformer_mt.data.corpus import ParallelText
from transformer_mt.data.mixture import Mixture, tempered, weighted_sample


def counts(rows: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(rows, minlength=size)


def test_a_weight_of_two_shows_every_pair_twice_and_a_half_a_different_half_each_epoch():
    mixture = Mixture(["big", "small"], [100, 40], [0.5, 2.0], seed=3)
    epochs = [mixture.rows(epoch) for epoch in range(3)]
    for rows in epochs:
        seen = counts(rows, 140)
        assert (seen[100:] == 2).all()  # the small corpus: every pair twice
        assert sorted(set(seen[:100].tolist())) == [0, 1] and seen[:100].sum() == 50  # half of the big one, once
    halves = [set(np.flatnonzero(counts(rows, 140)[:100] == 1).tolist()) for rows in epochs]
    assert halves[0] != halves[1] != halves[2]  # a different half each epoch
    again = Mixture(["big", "small"], [100, 40], [0.5, 2.0], seed=3)
    assert all(np.array_equal(again.rows(e), rows) for e, rows in enumerate(epochs))  # from (seed, epoch) alone
    assert not np.array_equal(Mixture(["big", "small"], [100, 40], [0.5, 2.0], seed=4).rows(0), epochs[0])
    assert [share.shown for share in mixture.shares] == [50, 80]


def test_a_fractional_weight_above_one_is_every_pair_once_and_a_share_again():
    rows = Mixture(["a"], [10], [1.3]).rows(0)
    assert sorted(set(counts(rows, 10).tolist())) == [1, 2] and len(rows) == 13


def test_a_temperature_gives_each_corpus_its_tempered_share_of_the_same_epoch():
    pairs = [900, 100]
    weights = tempered([1.0, 1.0], pairs, 2.0)  # p ∝ n^(1/2): 30 : 10, of 1000 pairs
    assert weights == pytest.approx([750 / 900, 250 / 100])
    assert tempered([1.0, 1.0], pairs, 1.0) == pytest.approx([1.0, 1.0])
    assert tempered([2.0, 1.0], pairs, None) == [2.0, 1.0]
    shares = Mixture(["a", "b"], pairs, [1.0, 1.0], temperature=2.0).shares
    assert [share.shown for share in shares] == [750, 250]


def test_one_corpus_of_weight_one_is_plain_and_an_empty_epoch_is_refused():
    assert Mixture(["a"], [5], [1.0]).plain and not Mixture(["a", "b"], [5, 5], [1.0, 0.5]).plain
    with pytest.raises(Exception, match="an epoch would be empty"):
        Mixture(["a"], [5], [0.0])


def test_the_ranks_share_the_epochs_rows_and_a_resumed_sampler_continues_them():
    """Under DDP every rank draws the same rows and takes its own batches of them; a sampler resumed
    mid-epoch yields the rest of that epoch's batches."""
    mixture = Mixture(["a", "b"], [60, 30], [0.5, 2.0], seed=1)
    sizes = np.random.default_rng(0).integers(3, 20, 90)

    def sampler(rank: int, replicas: int) -> TokenBudgetBatchSampler:
        made = TokenBudgetBatchSampler(sizes, 64, shuffle=True, seed=1, num_replicas=replicas, rank=rank,
                                       epoch_rows=mixture.rows)
        made.set_epoch(2)
        return made

    ranks = [list(sampler(rank, 2)) for rank in (0, 1)]
    assert len(ranks[0]) == len(ranks[1])
    alone = list(sampler(0, 1))
    assert sorted(i for batch in alone for i in batch) == sorted(mixture.rows(2).tolist())
    together = [i for rank in ranks for batch in rank for i in batch]
    assert set(together) == set(mixture.rows(2).tolist())
    resumed = sampler(0, 1)
    resumed.load_state_dict({"epoch": 2, "consumed": 3, "seed": 1, "num_replicas": 1})
    assert list(resumed) == alone[3:]
    for batch in alone:
        assert len(batch) * max(sizes[batch]) <= 64


def test_the_vocabulary_text_takes_each_corpus_by_its_share_of_an_epoch():
    big = ParallelText([f"b{i}" for i in range(100)], [f"B{i}" for i in range(100)], stats={"pairs": 1000})
    small = ParallelText([f"s{i}" for i in range(10)], [f"S{i}" for i in range(10)], stats={"pairs": 10})
    assert weighted_sample([big], [1.0], 100) is big  # one corpus: its sample as it is
    mixed = weighted_sample([big, small], [0.05, 5.0], 100)  # an epoch: 50 big pairs, 50 small ones
    assert sum(s.startswith("b") for s in mixed.src) == 50 and sum(s.startswith("s") for s in mixed.src) == 50
    assert mixed.src.count("s3") == 5  # the small sample repeated
    assert [s[1:] for s in mixed.src] == [t[1:] for t in mixed.tgt]  # pairs stay aligned
    assert mixed.stats["pairs"] == 1010
