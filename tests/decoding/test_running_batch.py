"""Greedy search over a running batch (decoding/running_batch.py): rows that join between steps,
each at its own position, and leave the step they end, get what greedy search gives each source
alone (tokens exactly, scores to rounding), whatever joined before, with or after them: sinusoidal
and learned positions, min_len and the length limits, fp32 and int8; what it cannot decode
(rotary and relative positions, the n-gram ban) it says it does not take."""

import pytest
import torch

from tests.helpers import make_model
from transformer_mt.decoding import GreedySearch, SearchOptions
from transformer_mt.decoding.running_batch import RunningBatch
from transformer_mt.model.quantize import DecodingCopies

BOS, EOS = 1, 2


def sources(count: int, seed: int = 1) -> list[list[int]]:
    """Random sources of 2 to 12 tokens, EOS last."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 13, (count,), generator=generator).tolist()
    return [torch.randint(4, 50, (n - 1,), generator=generator).tolist() + [EOS] for n in lengths]


def alone(model, options: SearchOptions, src: list[list[int]]) -> list:
    """Each source's greedy hypothesis, decoded in a batch of its own."""
    return [GreedySearch(options)(model, torch.tensor([ids]), BOS, EOS)[0][0] for ids in src]


def running(model, options: SearchOptions, src: list[list[int]], every: int, group: int) -> dict:
    """The sources joining a running batch `group` at a time every `every` steps: each one's hypothesis."""
    batch, out, waiting, step = RunningBatch(model, options, BOS, EOS), {}, list(range(len(src))), 0
    while waiting or batch.rows:
        if waiting and step % every == 0:
            taken, waiting = waiting[:group], waiting[group:]
            batch.admit([src[i] for i in taken], taken)
        for owner, hypothesis in batch.step():
            assert owner not in out
            out[owner] = hypothesis
        step += 1
    return out


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
@pytest.mark.parametrize("every, group", [(1, 1), (2, 3), (5, 4)])
def test_rows_joining_at_any_step_get_greedy_search_of_each_alone(positional, every, group):
    model = make_model(positional=positional, max_positions=64)
    options = SearchOptions(max_len_a=1.0, max_len_b=5, min_len=2)
    src = sources(14)
    expected, got = alone(model, options, src), running(model, options, src, every, group)
    assert [got[i].tokens for i in range(len(src))] == [h.tokens for h in expected]
    assert [got[i].score for i in range(len(src))] == pytest.approx([h.score for h in expected], abs=1e-5)
    assert all(len(h.tokens) >= 2 for h in expected)  # min_len held
    assert any(len(h.tokens) == len(s) + 5 for h, s in zip(expected, src))  # some rows end at their limit


def test_slots_freed_are_taken_again_and_the_buffers_shrink_when_most_are_free():
    """40 sources, 8 joining at each of the first five steps: the slots grow by doubling, rows that
    end free theirs for later rows, and once most slots are free the buffers are cut to the rows
    left; every row still gets greedy search's tokens alone."""
    model, options = make_model(max_positions=64), SearchOptions(max_len_a=1.0, max_len_b=8)
    src = sources(40, seed=7)
    batch, out, slots = RunningBatch(model, options, BOS, EOS), {}, []
    for step in range(200):
        if step < 5:
            batch.admit([src[i] for i in range(8 * step, 8 * step + 8)], list(range(8 * step, 8 * step + 8)))
        out.update(batch.step())
        slots.append(len(batch.owners))
        if not batch.rows:
            break
    assert max(slots) == 64 and slots[-1] < 16  # 8, 16, 32, 64 slots; then cut down
    assert [out[i].tokens for i in range(40)] == [h.tokens for h in alone(model, options, src)]


def test_int8_rows_get_what_the_int8_model_gives_alone():
    model = DecodingCopies(make_model(max_positions=64), None).int8()
    options = SearchOptions(max_len_a=1.0, max_len_b=5)
    src = sources(10, seed=3)
    expected, got = alone(model, options, src), running(model, options, src, 2, 3)
    assert [got[i].tokens for i in range(len(src))] == [h.tokens for h in expected]


def test_an_emptied_batch_takes_rows_again():
    model, options = make_model(max_positions=64), SearchOptions(max_len_a=1.0, max_len_b=3)
    src = sources(4, seed=5)
    batch = RunningBatch(model, options, BOS, EOS)
    batch.admit(src[:2], [0, 1])
    first = {}
    while batch.rows:
        first.update(batch.step())
    batch.admit(src[2:], [2, 3])
    second = {}
    while batch.rows:
        second.update(batch.step())
    assert {**first, **second}.keys() == {0, 1, 2, 3}
    assert [{**first, **second}[i].tokens for i in range(4)] == [h.tokens for h in alone(model, options, src)]


def test_what_it_does_not_take():
    assert RunningBatch.takes(make_model(), SearchOptions())
    assert not RunningBatch.takes(make_model(positional="rotary"), SearchOptions())
    assert not RunningBatch.takes(make_model(positional="relative", max_relative_positions=8), SearchOptions())
    assert not RunningBatch.takes(make_model(), SearchOptions(no_repeat_ngram_size=2))
    assert not RunningBatch.takes(make_model(), SearchOptions(use_cache=False))
