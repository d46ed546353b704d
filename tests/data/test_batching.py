"""Token-budget batches: properties over random inputs (hypothesis), resumption, collation."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler
from transformer_mt.errors import DataError

sizes_st = st.lists(st.integers(min_value=1, max_value=80), min_size=1, max_size=400)


@settings(max_examples=60, deadline=None)
@given(sizes=sizes_st, budget=st.integers(80, 1000), world=st.integers(1, 4), seed=st.integers(0, 5),
       epoch=st.integers(0, 3))
def test_training_epoch_properties(sizes, budget, world, seed, epoch):
    shards = []
    for rank in range(world):
        sampler = TokenBudgetBatchSampler(sizes, budget, shuffle=True, seed=seed, num_replicas=world, rank=rank)
        sampler.set_epoch(epoch)
        shards.append(list(sampler))
    assert len({len(s) for s in shards}) == 1  # every rank runs the same number of steps
    seen = [i for s in shards for b in s for i in b]
    assert set(seen) == set(range(len(sizes)))  # every example, each at most once unless padding the shards
    largest = max(len(b) for s in shards for b in s)
    assert len(seen) - len(sizes) <= (world - 1) * largest  # at most world - 1 repeated batches
    for batch in (b for s in shards for b in s):
        assert len(batch) * max(sizes[i] for i in batch) <= budget
    again = TokenBudgetBatchSampler(sizes, budget, shuffle=True, seed=seed, num_replicas=world, rank=0)
    again.set_epoch(epoch)
    assert list(again) == shards[0]  # the same (seed, epoch) gives the same batches


@settings(max_examples=60, deadline=None)
@given(sizes=sizes_st, budget=st.integers(80, 1000), world=st.integers(1, 4))
def test_evaluation_sees_every_example_exactly_once_across_ranks(sizes, budget, world):
    if len(sizes) < world:
        with pytest.raises(DataError, match="cannot be shared"):
            list(TokenBudgetBatchSampler(sizes, budget, False, 0, world, 0, even=False))
        return
    shards = [list(TokenBudgetBatchSampler(sizes, budget, False, 0, world, r, even=False)) for r in range(world)]
    assert sorted(i for s in shards for b in s for i in b) == list(range(len(sizes)))
    assert all(shards)  # every rank has work, so all of them reach the end-of-evaluation gather


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 50), min_size=20, max_size=300), stop=st.integers(0, 30), epoch=st.integers(0, 3))
def test_a_resumed_sampler_yields_the_remaining_batches(sizes, stop, epoch):
    first = TokenBudgetBatchSampler(sizes, 200, shuffle=True, seed=1)
    first.set_epoch(epoch)
    full = list(first)
    stop = min(stop, len(full))
    first.set_epoch(epoch)  # a new pass over the same epoch
    it = iter(first)
    for _ in range(stop):
        next(it)
    state = first.state_dict()
    assert state["consumed"] == stop and state["epoch"] == epoch
    resumed = TokenBudgetBatchSampler(sizes, 200, shuffle=True, seed=1)
    resumed.load_state_dict(state)
    resumed.set_epoch(epoch)
    assert list(resumed) == full[stop:]
    resumed.set_epoch(epoch + 1)  # the next epoch is whole again
    assert len(list(resumed)) == len(resumed)


def test_resume_refuses_another_seed_or_world_size():
    state = TokenBudgetBatchSampler([3] * 50, 30, True, seed=1).state_dict()
    with pytest.raises(DataError, match="another seed or number of processes"):
        TokenBudgetBatchSampler([3] * 50, 30, True, seed=2).load_state_dict(state)


def test_padding_fraction_is_far_below_fixed_size_batches():
    rng = random.Random(0)
    sizes = [max(2, int(rng.gauss(16, 6))) for _ in range(5000)]
    sampler = TokenBudgetBatchSampler(sizes, 2048, shuffle=True, seed=0)
    fixed = [sizes[i : i + 64] for i in range(0, len(sizes), 64)]  # 64 sentences in corpus order
    fixed_padding = 1 - sum(sizes) / sum(len(b) * max(b) for b in fixed)
    assert sampler.padding_fraction() < 0.05 < 0.3 < fixed_padding


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
    assert batch["tgt_text"] == ["b", "d"]


def test_lightning_set_epoch_reaches_the_batch_sampler_on_every_rank():
    """Lightning calls set_epoch on `dataloader.sampler` and `batch_sampler.sampler` only; through
    the EpochHook it reaches our batch sampler, so each epoch (and each DDP rank) gets a new order."""
    from lightning.fabric.utilities.data import _set_sampler_epoch
    from torch.utils.data import DataLoader

    sizes = [random.Random(i).randint(3, 30) for i in range(300)]
    orders = {}
    for rank in range(2):
        sampler = TokenBudgetBatchSampler(sizes, 120, shuffle=True, seed=7, num_replicas=2, rank=rank)
        loader = DataLoader(list(range(len(sizes))), batch_sampler=sampler)
        for epoch in range(3):
            _set_sampler_epoch(loader, epoch)
            assert sampler.epoch == epoch
            orders[rank, epoch] = list(sampler)
    for epoch in range(3):
        mine, theirs = orders[0, epoch], orders[1, epoch]
        assert len(mine) == len(theirs)
        assert {i for b in mine + theirs for i in b} == set(range(len(sizes)))
    assert orders[0, 0] != orders[0, 1] != orders[0, 2] and orders[1, 0] != orders[1, 1]
