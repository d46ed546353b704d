"""Token-budget batches: properties over random inputs (hypothesis), resumption, collation (equal to
the former per-sentence Python collator), padding to a multiple."""

import random

import datasets
import numpy as np
import pyarrow as pa
import pytest
import torch
from datasets.arrow_writer import ArrowWriter
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset
from transformer_mt.data.encoding import EVAL_FEATURES, TRAIN_FEATURES
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
        pa.table({"src_ids": [[5, 6, 2], [5, 2]], "tgt_ids": [[7], [8, 9]], "src_text": ["a", "c"],
                  "tgt_text": ["b", "d"], "id": [0, 1]})
    )
    assert batch["src"].tolist() == [[5, 6, 2], [5, 2, 0]]
    assert batch["tgt_in"].tolist() == [[1, 7, 0], [1, 8, 9]]
    assert batch["tgt_out"].tolist() == [[7, 2, 0], [8, 9, 2]]
    assert batch["tgt_text"] == ["b", "d"]
    assert (batch["num_tokens"], batch["num_src_tokens"]) == (3 + 2 + 2 + 3, 5)


class PythonCollator:
    """The collator before it was vectorized (Python lists, a tensor and a copy per sentence): the
    reference the vectorized one must equal."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int) -> None:
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id

    def pad(self, seqs: list[list[int]]) -> torch.Tensor:
        out = torch.full((len(seqs), max(len(s) for s in seqs)), self.pad_id, dtype=torch.long)
        for i, s in enumerate(seqs):
            out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        return out

    def __call__(self, table, indices: list[int]) -> dict:
        rows = table[indices]  # the former TranslationDataset.__getitems__: Arrow rows as Python lists
        examples = [{"id": i, "src": s, "tgt": t} for i, s, t in zip(indices, rows["src_ids"], rows["tgt_ids"])]
        if "tgt_text" in table.column_names:
            for example, src, tgt in zip(examples, rows["src_text"], rows["tgt_text"]):
                example["src_text"], example["tgt_text"] = src, tgt
        batch = {
            "id": torch.tensor([e["id"] for e in examples], dtype=torch.long),
            "src": self.pad([e["src"] for e in examples]),
            "tgt_in": self.pad([[self.bos_id, *e["tgt"]] for e in examples]),
            "tgt_out": self.pad([[*e["tgt"], self.eos_id] for e in examples]),
            "num_tokens": sum(len(e["src"]) + len(e["tgt"]) + 1 for e in examples),
            "num_src_tokens": sum(len(e["src"]) for e in examples),
        }
        if "tgt_text" in examples[0]:
            batch["src_text"] = [e["src_text"] for e in examples]
            batch["tgt_text"] = [e["tgt_text"] for e in examples]
        return batch


def random_arrow_file(path, n: int, with_text: bool, seed: int = 0) -> datasets.Dataset:
    """n random pairs written as the datamodule writes them, memory-mapped back: sources of 1 (EOS
    alone) to 40 tokens, targets of 0 to 40."""
    rng = np.random.default_rng(seed)
    src = [[*rng.integers(4, 1000, rng.integers(0, 40)).tolist(), 2] for _ in range(n)]
    tgt = [rng.integers(4, 1000, rng.integers(0, 41)).tolist() for _ in range(n)]
    src[0], tgt[0], tgt[1] = [2], [], []  # the edge cases: a lone EOS, empty targets
    rows = {"src_ids": src, "tgt_ids": tgt, "src_len": [len(s) for s in src], "tgt_len": [len(t) for t in tgt]}
    if with_text:
        rows = {"src_text": [f"s{i}" for i in range(n)], "tgt_text": [f"t{i}" for i in range(n)], **rows}
    with ArrowWriter(features=EVAL_FEATURES if with_text else TRAIN_FEATURES, path=str(path)) as writer:
        writer.write_batch(rows)
        writer.finalize()
    return datasets.Dataset.from_file(str(path))


def assert_same_batch(new: dict, old: dict) -> None:
    assert new.keys() == old.keys()
    for key, value in old.items():
        if isinstance(value, torch.Tensor):
            assert new[key].dtype == torch.long and torch.equal(new[key], value), key
        else:
            assert type(new[key]) is type(value) and new[key] == value, key


@pytest.mark.parametrize("with_text", [False, True])
def test_vectorized_collate_equals_the_python_collator(tmp_path, with_text):
    table = random_arrow_file(tmp_path / "ids.arrow", 300, with_text)
    dataset, new, old = TranslationDataset(table), Collator(0, 1, 2), PythonCollator(0, 1, 2)
    rng = random.Random(1)
    batches = [[0], [1], [0, 1], [1, 0, 5], list(range(300))]  # lone EOS, empty targets, all of it
    batches += [rng.sample(range(300), rng.randint(1, 60)) for _ in range(40)]
    for indices in batches:
        assert_same_batch(new(dataset.__getitems__(indices)), old(table, indices))
    sampler = TokenBudgetBatchSampler(dataset.sizes(), 400, shuffle=True, seed=3)  # as the DataLoader does it
    loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=new)
    for indices, batch in zip(sampler, loader, strict=True):
        assert_same_batch(batch, old(table, indices))


@pytest.mark.parametrize("multiple", [2, 8])
def test_pad_to_multiple_pads_the_same_batch_further(tmp_path, multiple):
    table = random_arrow_file(tmp_path / "ids.arrow", 100, with_text=False)
    dataset, plain, padded = TranslationDataset(table), Collator(0, 1, 2), Collator(0, 1, 2, pad_to_multiple=multiple)
    for indices in ([0], [1, 2, 3], list(range(100))):
        rows = dataset.__getitems__(indices)
        a, b = plain(rows), padded(rows)
        for key in ("src", "tgt_in", "tgt_out"):
            width = a[key].shape[1]
            assert b[key].shape == (len(indices), -(-width // multiple) * multiple)  # the next multiple up
            assert torch.equal(b[key][:, :width], a[key]) and (b[key][:, width:] == 0).all()
        assert (b["num_tokens"], b["num_src_tokens"], b["id"].tolist()) == (a["num_tokens"], a["num_src_tokens"],
                                                                            indices)


def test_pad_equals_the_python_pad():
    rng = random.Random(0)
    for _ in range(20):
        seqs = [[rng.randint(1, 50) for _ in range(rng.randint(1, 30))] for _ in range(rng.randint(1, 20))]
        new, old = Collator(0, 1, 2).pad(seqs), PythonCollator(0, 1, 2).pad(seqs)
        assert new.dtype == torch.long and torch.equal(new, old)
    assert Collator(3, 1, 2).pad([[7], [5, 6, 9]]).tolist() == [[7, 3, 3], [5, 6, 9]]


@settings(max_examples=40, deadline=None)
@given(sizes=sizes_st, budget=st.integers(80, 1000), multiple=st.sampled_from([2, 8, 64]))
def test_padded_batches_fit_the_budget(sizes, budget, multiple):
    if max(-(-s // multiple) * multiple for s in sizes) > budget:
        with pytest.raises(DataError, match=f"padded to a multiple of {multiple}, more than the batch budget"):
            TokenBudgetBatchSampler(sizes, budget, shuffle=True, pad_to_multiple=multiple)
        return
    sampler = TokenBudgetBatchSampler(sizes, budget, shuffle=True, seed=1, pad_to_multiple=multiple)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(sizes)))
    for batch in batches:  # count x (longest rounded up to the multiple) within the budget
        assert len(batch) * (-(-max(sizes[i] for i in batch) // multiple) * multiple) <= budget
    assert 0 <= sampler.padding_fraction() < 1


def test_lightning_set_epoch_reaches_the_batch_sampler_on_every_rank():
    """Lightning calls set_epoch on `dataloader.sampler` and `batch_sampler.sampler` only; through
    the EpochHook it reaches our batch sampler, so each epoch (and each DDP rank) gets a new order."""
    from lightning.fabric.utilities.data import _set_sampler_epoch

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
