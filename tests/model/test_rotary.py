"""model.positional=rotary: queries and keys of self-attention rotated by their positions (RoPE).
Their dot products depend on the positions' difference only; incremental decoding with the cache,
the static step and packed streams equal the full, padded decoding; no position is added to the
embeddings; what cannot hold rotary positions refuses them in one line."""

import copy

import pytest
import torch

from tests.decoding.test_static_step import CountingBackend, same
from tests.helpers import make_model, padded_sources
from transformer_mt.decoding import BeamSearch, GreedySearch, SearchOptions
from transformer_mt.errors import ConfigError
from transformer_mt.interop.ctranslate2 import build_spec
from transformer_mt.model.rotary import Rotary
from transformer_mt.model.static_step import StaticDecoder


def test_a_rotated_dot_product_depends_on_the_distance_only():
    rotary = Rotary(8, 64)
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(i: int, j: int) -> float:
        return float((rotary(q, torch.tensor([i])) * rotary(k, torch.tensor([j]))).sum())

    assert score(3, 1) == pytest.approx(score(12, 10), abs=1e-5) == pytest.approx(score(40, 38), abs=1e-5)
    assert score(3, 1) != pytest.approx(score(3, 2), abs=1e-3)
    assert float(rotary(q, torch.tensor([0])).sub(q).abs().max()) == 0.0  # position 0: no rotation
    assert torch.allclose(rotary(q, torch.tensor([5])).norm(), q.norm())  # a rotation keeps the length


@torch.no_grad()
def test_incremental_decoding_with_the_cache_equals_full_decoding():
    model = make_model(positional="rotary")
    src = torch.randint(4, 50, (3, 8))
    src[1, 5:] = 0
    tgt = torch.randint(4, 50, (3, 6))
    full = model.decode(tgt, model.encode(src), src)
    memory, cache = model.encode(src), model.init_cache()
    steps = [model.decode(tgt[:, t : t + 1], memory, src, cache=cache) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    index = torch.tensor([2, 0, 1])
    nxt = torch.randint(4, 50, (3, 1))
    moved = model.decode(nxt, memory, src, cache=copy.deepcopy(cache))[index]
    cache.select(index, index)
    torch.testing.assert_close(model.decode(nxt[index], memory[index], src[index], cache=cache), moved, atol=1e-5,
                               rtol=0)


def test_positions_change_the_outputs_and_nothing_is_added_to_the_embeddings():
    model = make_model(positional="rotary", dropout=0.0)
    assert not [name for name, _ in model.named_parameters() if "learned" in name]
    src = torch.randint(4, 50, (1, 6))
    memory = model.encode(src)
    # the same tokens in another order: a model without positions would give the same set of states
    flipped = model.encode(src.flip(1))
    assert not torch.allclose(memory.flip(1), flipped, atol=1e-4)


@pytest.mark.parametrize("search", [GreedySearch(SearchOptions(max_len_b=6)),
                                    BeamSearch(3, nbest=2, options=SearchOptions(max_len_b=6))], ids=["greedy", "beam"])
def test_the_static_step_and_no_cache_give_the_cached_hypotheses(search):
    model, src = make_model(positional="rotary", dropout=0.0), padded_sources()
    reference = search(model, src, 1, 2)
    same(search(StaticDecoder(model, backend=CountingBackend()), src, 1, 2), reference)
    plain = copy.copy(search)
    plain.options = SearchOptions(max_len_b=6, use_cache=False)
    same(plain(model, src, 1, 2), reference)


def test_what_cannot_hold_rotary_positions_refuses_them_in_one_line():
    with pytest.raises(ConfigError, match=r"^model\.d_k=5: must be even with model\.positional=rotary"):
        make_model(positional="rotary", d_k=5)
    pytest.importorskip("ctranslate2")
    with pytest.raises(ConfigError, match=r"^model\.positional=rotary: CTranslate2's encoder-decoder spec"):
        build_spec(make_model(positional="rotary"), None)
