"""model.positional=relative (Shaw et al. 2018): attention by the formula, computed here by hand;
distances clipped at model.max_relative_positions; the static step and no cache give the cached
hypotheses (rotary too; the cache itself: tests/model/test_transformer.py); packed batches refuse
it in one line. (The CTranslate2 export: tests/interop/test_ct2_positions.py.)"""

import copy
import math

import pytest
import torch
from omegaconf import OmegaConf

from tests.decoding.test_static_step import CountingBackend, same
from tests.helpers import compose_config, make_model, padded_sources
from transformer_mt.decoding import BeamSearch, GreedySearch, SearchOptions
from transformer_mt.errors import ConfigError
from transformer_mt.model.relative import RelativePositions
from transformer_mt.model.static_step import StaticDecoder
from transformer_mt.schema.architecture import ModelGroup
from transformer_mt.schema.keys import check_keys
from transformer_mt.tasks import run


def test_attention_with_relative_positions_by_hand():
    torch.manual_seed(0)
    relative = RelativePositions(4, clip=2)
    q, k, v = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 4)
    queries = torch.tensor([2, 3, 4])  # the last three of five positions, as with a cache
    out, weights = relative.attend(q, k, v, None, True, queries, 0.0)
    for t, i in enumerate(queries.tolist()):
        e = [float(q[0, 0, t] @ (k[0, 0, j] + relative.keys.weight[max(-2, min(2, j - i)) + 2])) / math.sqrt(4)
             if j <= i else -math.inf for j in range(5)]
        p = torch.tensor(e).softmax(dim=0)
        z = sum(p[j] * (v[0, 0, j] + relative.values.weight[max(-2, min(2, j - i)) + 2]) for j in range(5))
        torch.testing.assert_close(weights[0, 0, t], p, atol=1e-6, rtol=0)
        torch.testing.assert_close(out[0, 0, t], z, atol=1e-5, rtol=0)
    assert relative.distances(torch.tensor([0]), torch.arange(8)).tolist() == [[2, 3, 4, 4, 4, 4, 4, 4]]


@pytest.mark.parametrize("search", [GreedySearch(SearchOptions(max_len_b=6)),
                                    BeamSearch(3, nbest=2, options=SearchOptions(max_len_b=6))], ids=["greedy", "beam"])
@pytest.mark.parametrize("positional", ["rotary", "relative"])
def test_the_static_step_and_no_cache_give_the_cached_hypotheses(search, positional):
    """For both kinds of positions inside self-attention: the static step's query at its position."""
    model, src = make_model(positional=positional, dropout=0.0), padded_sources()
    reference = search(model, src, 1, 2)
    same(search(StaticDecoder(model, backend=CountingBackend()), src, 1, 2), reference)
    plain = copy.copy(search)
    plain.options = SearchOptions(max_len_b=6, use_cache=False)
    same(plain(model, src, 1, 2), reference)


def test_packed_batches_refuse_relative_positions(tmp_path):
    with pytest.raises(ConfigError, match=r"^data\.packed=true: model\.positional=relative"):
        run(compose_config(tmp_path / "run", ["model.positional=relative", "data.packed=true"]))
    with pytest.raises(ConfigError, match=r"^model\.max_relative_positions=0: must be an integer >= 1"):
        check_keys(OmegaConf.structured(ModelGroup(positional="relative", max_relative_positions=0)), "model.")
