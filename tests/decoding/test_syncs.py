"""Searches do not wait for the host at every step: the ops that force a host sync on a GPU,
recorded under a TorchDispatchMode on the CPU, occur once per check interval (plus a few at the
start and the end), and the outputs do not depend on the interval."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.decoding.toy_models import BOS, EOS, TABLE_1, TABLE_2, MarkovModel
from tests.helpers import make_model, padded_sources
from transformer_mt.decoding import BeamSearch, GreedySearch, Sampling, SearchOptions

aten = torch.ops.aten
SYNCING = {aten._local_scalar_dense, aten.item, aten.nonzero, aten.masked_select, aten.repeat_interleave}
INDEXING = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}


def forces_sync(func, args) -> bool:
    """What waits for a GPU: reading a value (item, bool, int), nonzero, boolean-mask indexing,
    a copy to the CPU (invisible on a CPU run, where nothing is on another device)."""
    packet = func.overloadpacket
    if packet in SYNCING:
        return True
    if packet in INDEXING:
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1] if i is not None)
    if packet in (aten._to_copy, aten.copy_):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        return any(t.device.type != "cpu" for t in tensors) and any(t.device.type == "cpu" for t in tensors)
    return False


class SyncRecorder(TorchDispatchMode):
    """Records the name of every op that forces a host sync, and every Tensor.tolist() (which
    reads the data without an op)."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if forces_sync(func, args):
            self.syncs.append(str(func))
        return func(*args, **(kwargs or {}))


def record(search, model, src) -> tuple[list, list[str], int]:
    """The search's output, the syncs it forced and how many decoder steps it ran."""
    calls = []
    decode = model.decode

    def counting(*args, **kwargs):
        calls.append(1)
        return decode(*args, **kwargs)

    recorder = SyncRecorder()
    tolist = torch.Tensor.tolist

    def recorded_tolist(self):
        recorder.syncs.append("tolist")
        return tolist(self)

    model.decode = counting
    torch.Tensor.tolist = recorded_tolist
    try:
        with recorder:
            out = search(model, src, BOS, EOS)
    finally:
        torch.Tensor.tolist = tolist
        del model.decode
    return out, recorder.syncs, len(calls)


def test_the_recorder_sees_what_syncs():
    recorder = SyncRecorder()
    x = torch.tensor([1.0, -2.0, 3.0])
    with recorder:
        bool(x.any()), x.nonzero(), x[x > 0], float(x.sum())
        x.masked_fill(x > 0, 0.0), x.index_select(0, torch.tensor([2, 0]))  # these do not sync
    assert len(recorder.syncs) == 4


@pytest.mark.parametrize("search_cls, options", [(GreedySearch, {}), (BeamSearch, {"beam_size": 4, "nbest": 2})])
def test_a_search_syncs_once_per_check_not_every_step(search_cls, options):
    """About 30 steps on a small model whose sentences end at different steps: at most one sync
    per 8 steps, plus a few at the start (the length limits) and the end (the outputs); checking
    every step syncs every step. (Before issue 22, the same searches: 71 syncs for greedy, 321 for beam 4.)"""
    model, src = make_model(output_bias=True), padded_sources()
    with torch.no_grad():
        model.output_proj.bias[EOS] = 3.2  # EOS likely enough to end sentences between 18 and 30 tokens
    limits = dict(max_len_a=0, max_len_b=30, min_len=18)
    out, syncs, steps = record(search_cls(**options, options=SearchOptions(check_every=8, **limits)), model, src)
    assert steps >= 25 and len({len(n[0].tokens) for n in out}) > 1
    assert len(syncs) <= steps // 8 + 5, syncs
    every_step, syncs_1, steps_1 = record(search_cls(**options, options=SearchOptions(check_every=1, **limits)), model,
                                          src)
    assert len(syncs_1) >= steps_1 >= 25
    assert [[h.tokens for h in n] for n in out] == [[h.tokens for h in n] for n in every_step]


@pytest.mark.parametrize("search_cls, options", [(GreedySearch, {}), (BeamSearch, {"beam_size": 4, "nbest": 2})])
def test_a_forced_prefix_adds_no_sync(search_cls, options):
    """Target prefixes of 0 to 5 tokens: the forcing rule runs on the device, so the search syncs as
    it does without them, once per check (and a few times at the start and the end)."""
    model, src = make_model(), padded_sources()
    given = torch.tensor([[7, 8, 9, 10, 11], [7, 0, 0, 0, 0], [0, 0, 0, 0, 0], [12, 13, 0, 0, 0]])
    search = search_cls(**options, options=SearchOptions(check_every=8, max_len_a=0, max_len_b=20, min_len=12))
    out, syncs, steps = record(lambda *args: search(*args, given), model, src)
    assert steps >= 12 and len(syncs) <= steps // 8 + 5, syncs
    assert out[0][0].tokens[:5] == [7, 8, 9, 10, 11] and out[3][0].tokens[:2] == [12, 13]


@pytest.mark.parametrize("check_every", [2, 3, 8, 50])
def test_outputs_do_not_depend_on_the_check_interval(check_every):
    """On the toy model (exact arithmetic, sentences of one batch ending at different steps),
    greedy, beam search and top-1 sampling give exactly what they give when checking every step."""
    model = MarkovModel({1: TABLE_1, 2: TABLE_2})
    src = torch.tensor([[t, 5, 5] for t in (2, 1, 2, 1)])
    for make in (lambda c: GreedySearch(options=SearchOptions(max_len_a=0, max_len_b=8, check_every=c)),
                 lambda c: GreedySearch(SearchOptions(max_len_a=0, max_len_b=8, no_repeat_ngram_size=2,
                                                      check_every=c)),
                 lambda c: BeamSearch(beam_size=3, nbest=3,
                                      options=SearchOptions(max_len_a=0, max_len_b=6, check_every=c)),
                 lambda c: BeamSearch(beam_size=2, nbest=2, options=SearchOptions(min_len=2, no_repeat_ngram_size=2,
                                                                                  max_len_b=7, check_every=c)),
                 lambda c: Sampling(top_k=1, seed=0, options=SearchOptions(max_len_a=0, max_len_b=8, check_every=c))):
        assert make(check_every)(model, src, BOS, EOS) == make(1)(model, src, BOS, EOS)


def test_outputs_on_a_random_model_at_every_interval():
    """The random model's tokens agree at every check interval; scores agree to float rounding (a
    row's arithmetic can round differently in a batch of another size, as in any batching)."""
    model, src = make_model(), padded_sources()
    for search in (GreedySearch, lambda o: BeamSearch(beam_size=3, nbest=3, options=o)):
        base = search(SearchOptions(max_len_a=1.0, max_len_b=5, check_every=1))(model, src, 1, 2)
        for check_every in (3, 8):
            other = search(SearchOptions(max_len_a=1.0, max_len_b=5, check_every=check_every))(model, src, 1, 2)
            assert [[h.tokens for h in n] for n in other] == [[h.tokens for h in n] for n in base]
            for a, b in zip(other, base):
                assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


def test_sampling_draws_what_torch_multinomial_draws():
    from transformer_mt.decoding.sampling import multinomial

    probs = torch.rand(7, 300).softmax(dim=-1)
    ours = multinomial(probs, torch.Generator().manual_seed(4))
    theirs = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(4)).squeeze(1)
    assert torch.equal(ours, theirs)
