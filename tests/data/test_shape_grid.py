"""data.shape_grid: the fitted lengths are the least-padding choice (against every choice), the
sampler's batches take the grid's shapes with every example once per epoch, shuffled per epoch,
resumable and shared by ranks, and the Collator's filling rows change neither the loss nor the
gradients."""

import itertools
import random
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.data.test_batching import random_arrow_file
from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset
from transformer_mt.data.shape_grid import ShapeGrid, fitted_lengths
from transformer_mt.errors import DataError
from transformer_mt.model.transformer import Transformer, TransformerConfig
from transformer_mt.training.loss import smoothed_loss

sizes_st = st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=300)


def positions(sizes: list[int], lengths: list[int], budget: int) -> int:
    """Padded positions of an epoch on these lengths: each size in the smallest length that holds
    it, each length's examples in whole batches of budget // length rows."""
    count = {length: 0 for length in lengths}
    for s in sizes:
        count[min(length for length in lengths if length >= s)] += 1
    rows = {length: max(1, budget // length) for length in lengths}
    return sum(-(-n // rows[length]) * rows[length] * length for length, n in count.items())


@settings(max_examples=80, deadline=None)
@given(sizes=st.lists(st.integers(1, 12), min_size=1, max_size=60), k=st.integers(1, 5), budget=st.integers(12, 60))
def test_the_fitted_lengths_pad_least_of_every_choice(sizes, k, budget):
    lengths = fitted_lengths(np.array(sizes), k, budget)
    values = sorted(set(sizes))
    assert len(lengths) <= k and lengths == sorted(set(lengths)) and lengths[-1] == max(sizes)
    assert set(lengths) <= set(values)
    choices = [[*c, values[-1]] for n in range(min(k, len(values))) for c in itertools.combinations(values[:-1], n)]
    assert positions(sizes, lengths, budget) == min(positions(sizes, c, budget) for c in choices)


@settings(max_examples=60, deadline=None)
@given(sizes=sizes_st, budget=st.integers(60, 1000), k=st.integers(1, 16), world=st.integers(1, 3),
       seed=st.integers(0, 3), epoch=st.integers(0, 2))
def test_grid_batches_take_the_grid_shapes_and_every_example_once(sizes, budget, k, world, seed, epoch):
    samplers = [TokenBudgetBatchSampler(sizes, budget, shuffle=True, seed=seed, num_replicas=world, rank=r,
                                        shape_grid=k) for r in range(world)]
    grid = samplers[0].grid
    assert len(grid.shapes()) <= k and all(rows * length <= budget for rows, length in grid.shapes())
    for s in samplers:
        s.set_epoch(epoch)
    shards = [list(s) for s in samplers]
    assert len({len(s) for s in shards}) == 1
    seen = [i for s in shards for b in s for i in b]
    assert set(seen) == set(range(len(sizes)))
    for batch in (b for s in shards for b in s):
        rows, length = grid.shape(max(sizes[i] for i in batch))
        assert len(batch) <= rows  # the Collator fills it up to the shape
        assert all(grid.shape(sizes[i]) == (rows, length) for i in batch)  # one shape's examples
    if world == 1:  # no batch repeated: at most one short batch per shape
        short = [b for b in shards[0] if len(b) < grid.shape(max(sizes[i] for i in b))[0]]
        assert len(short) <= len(grid.shapes())
        assert sum(map(samplers[0].padded_positions, shards[0])) == positions(sizes, list(grid.lengths), budget)


def test_grid_epochs_are_shuffled_and_a_resumed_sampler_yields_the_rest():
    rng = random.Random(0)
    sizes = [max(2, int(rng.gauss(20, 8))) for _ in range(2000)]
    sampler = TokenBudgetBatchSampler(sizes, 600, shuffle=True, seed=1, shape_grid=8)
    epochs = []
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        epochs.append(list(sampler))
    assert sorted(map(sorted, epochs[0])) != sorted(map(sorted, epochs[1]))  # other batches, not only their order
    first = TokenBudgetBatchSampler(sizes, 600, shuffle=True, seed=1, shape_grid=8)
    first.set_epoch(1)
    it = iter(first)
    for _ in range(7):
        next(it)
    resumed = TokenBudgetBatchSampler(sizes, 600, shuffle=True, seed=1, shape_grid=8)
    resumed.load_state_dict(first.state_dict())
    resumed.set_epoch(1)
    assert list(resumed) == epochs[1][7:]


def test_grid_padding_stays_near_todays_on_a_realistic_length_mix():
    """Fitted lengths pad little more than batches of similar lengths do: under 1.15x the positions."""
    rng = np.random.default_rng(0)
    sizes = np.clip(rng.lognormal(3.0, 0.5, 20000).astype(np.int64), 2, 250)
    today = TokenBudgetBatchSampler(sizes, 4096, shuffle=True, seed=0)
    grid = TokenBudgetBatchSampler(sizes, 4096, shuffle=True, seed=0, shape_grid=16)
    positions = [sum(s.padded_positions(b) for b in s.all_batches()) for s in (today, grid)]
    assert len(grid.grid.shapes()) == 16 and positions[1] <= 1.15 * positions[0]


def test_collated_grid_batches_have_their_shape_and_the_filling_rows_predict_nothing(tmp_path):
    table = random_arrow_file(tmp_path / "ids.arrow", 200, with_text=False)
    dataset = TranslationDataset(table)
    grid = ShapeGrid.fitted(dataset.sizes(), 4, 400)
    plain, on_grid = Collator(0, 1, 2), Collator(0, 1, 2, grid=grid)
    sampler = TokenBudgetBatchSampler(dataset.sizes(), 400, shuffle=True, seed=3, shape_grid=4)
    assert sampler.grid == grid
    for indices in sampler:
        rows = dataset.__getitems__(indices)
        a, b = plain(rows), on_grid(rows)
        count, length = grid.shape(int(dataset.sizes()[indices].max()))
        n = len(indices)
        for key in ("src", "tgt_in", "tgt_out"):
            assert b[key].shape == (count, length)
            width = a[key].shape[1]
            assert torch.equal(b[key][:n, :width], a[key]) and (b[key][:n, width:] == 0).all()
        assert (b["src"][n:, 0] == 2).all() and (b["tgt_in"][n:, 0] == 1).all()
        assert (b["src"][n:, 1:] == 0).all() and (b["tgt_in"][n:, 1:] == 0).all() and (b["tgt_out"][n:] == 0).all()
        assert (b["num_tokens"], b["id"].tolist()) == (a["num_tokens"], list(indices))


def test_a_batch_larger_than_its_shape_is_a_clear_error():
    grid = ShapeGrid((4, 8), (3, 1))
    with pytest.raises(DataError, match="longer than data.shape_grid's longest length 8"):
        grid.shape(9)


def test_the_filling_rows_change_neither_the_loss_nor_the_gradients(tmp_path):
    """In float64, the loss and every gradient of a batch on the grid equal the plain batch's (up to
    the order of sums: the filling rows add exact zeros)."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=1000, tgt_vocab_size=1000, d_model=32, heads=4,
                                          d_ff=64, num_encoder_layers=2, num_decoder_layers=2, dropout=0.0,
                                          pad_id=0)).double()
    table = random_arrow_file(tmp_path / "ids.arrow", 60, with_text=False)
    dataset = TranslationDataset(table)
    grid = ShapeGrid.fitted(dataset.sizes(), 3, 800)
    indices = [3, 9, 17, 40]
    rows = dataset.__getitems__(indices)
    results = []
    for collate in (Collator(0, 1, 2), Collator(0, 1, 2, grid=grid)):
        batch = collate(rows)
        model.zero_grad()
        lprobs = torch.log_softmax(model(batch["src"], batch["tgt_in"]), dim=-1)  # float64 throughout
        loss, nll, count = smoothed_loss(lprobs, batch["tgt_out"], 0.1, 0)
        loss.backward()
        results.append((loss.detach(), nll, count, [p.grad.clone() for p in model.parameters()]))
    assert collate(rows)["src"].size(0) > len(indices)  # the grid did add rows
    (loss_a, nll_a, count_a, grads_a), (loss_b, nll_b, count_b, grads_b) = results
    assert count_a == count_b
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-12, atol=0)
    torch.testing.assert_close(nll_b, nll_a, rtol=1e-12, atol=0)
    for a, b in zip(grads_a, grads_b, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("overrides, message", [
    (["data.shape_grid=0"], r"^data.shape_grid=0: must be an integer >= 1 or null"),
    (["data.shape_grid=8", "data.packed=true"], r"^data.shape_grid with data.packed=true: packed batches"),
    (["data.shape_grid=8", "data.tokenizer.dropout=0.1"], r"^data.shape_grid with data.tokenizer.dropout: "),
])
def test_a_shape_grid_where_batches_have_no_fixed_shape_is_one_line_naming_the_keys(tmp_path, overrides, message):
    from tests.helpers import compose_config
    from transformer_mt.errors import ConfigError, find_user_error
    from transformer_mt.tasks import run

    with pytest.raises(Exception) as raised:  # noqa: PT011  (run.py reports the ConfigError behind Hydra's wrapper)
        run(compose_config(tmp_path, overrides))
    error = find_user_error(raised.value)
    assert isinstance(error, ConfigError) and re.match(message, str(error)), raised.value
