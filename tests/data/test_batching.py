"""Token-budget batches: every example once, the budget kept, deterministic per (seed, epoch)."""

import random

import pytest

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler
from transformer_mt.errors import DataError

SIZES = [random.Random(0).randint(1, 60) for _ in range(1000)]


def test_every_example_once_and_budget_kept():
    sampler = TokenBudgetBatchSampler(SIZES, max_tokens=300, shuffle=True, seed=3)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(SIZES)))
    assert all(len(b) * max(SIZES[i] for i in b) <= 300 for b in batches)
    assert 0 <= sampler.padding_fraction() < 0.05  # length buckets keep padding low


def test_same_seed_and_epoch_give_the_same_batches():
    a = TokenBudgetBatchSampler(SIZES, 300, shuffle=True, seed=3)
    b = TokenBudgetBatchSampler(SIZES, 300, shuffle=True, seed=3)
    assert list(a) == list(b)
    a.set_epoch(1)
    assert list(a) != list(b)
    b.set_epoch(1)
    assert list(a) == list(b)


@pytest.mark.parametrize("world", [2, 3, 4])
def test_training_shards_are_even_and_cover_everything(world):
    shards = [list(TokenBudgetBatchSampler(SIZES, 300, True, 3, num_replicas=world, rank=r)) for r in range(world)]
    assert len({len(s) for s in shards}) == 1
    assert {i for s in shards for b in s for i in b} == set(range(len(SIZES)))


@pytest.mark.parametrize("world", [2, 3, 4])
def test_evaluation_shards_see_every_example_exactly_once(world):
    shards = [list(TokenBudgetBatchSampler(SIZES, 300, False, 0, world, r, even=False)) for r in range(world)]
    assert sorted(i for s in shards for b in s for i in b) == list(range(len(SIZES)))


@pytest.mark.parametrize("world", [2, 3])
def test_every_rank_gets_an_evaluation_batch_even_when_one_would_do(world):
    shards = [list(TokenBudgetBatchSampler([5] * 10, 1000, False, 0, world, r, even=False)) for r in range(world)]
    assert all(shards) and sorted(i for s in shards for b in s for i in b) == list(range(10))
    with pytest.raises(DataError, match="2 sentences cannot be shared by 3 processes"):
        list(TokenBudgetBatchSampler([5, 5], 1000, False, 0, 3, 0, even=False))


def test_example_over_budget_is_a_clear_error():
    with pytest.raises(DataError, match="more than the batch budget 30"):
        TokenBudgetBatchSampler([10, 31], max_tokens=30, shuffle=False)


def test_collate_shifts_the_target():
    batch = Collator(pad_id=0, bos_id=1, eos_id=2)(
        [{"id": 0, "src": [5, 6, 2], "tgt": [7], "src_text": "a", "tgt_text": "b"},
         {"id": 1, "src": [5, 2], "tgt": [8, 9], "src_text": "c", "tgt_text": "d"}]
    )
    assert batch["src"].tolist() == [[5, 6, 2], [5, 2, 0]]
    assert batch["tgt_in"].tolist() == [[1, 7, 0], [1, 8, 9]]
    assert batch["tgt_out"].tolist() == [[7, 2, 0], [8, 9, 2]]
