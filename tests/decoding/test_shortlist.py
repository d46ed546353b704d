"""A vocabulary shortlist (decoding/shortlist.py, model/output_rows.py): the restricted output layer
equals those columns of the whole one (fp32, tied or with a bias, to the last bits; int8 per tensor or
per row, bit for bit); with a shortlist of every token, greedy and beam search (n-best, prefixes, constraints), int8,
ensembles and a <pad> that is not id 0 decode exactly as without one; with a real one, every output
token is a row of its batch, and forced prefix and constraint tokens outside the candidates still
come out."""

import copy

import pytest
import torch

from tests.helpers import make_model, padded_sources
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength, Sampling, SearchOptions
from transformer_mt.decoding.ensemble import Ensemble
from transformer_mt.decoding.shortlist import Shortlist, forced_ids, shortlisted_search
from transformer_mt.errors import ConfigError
from transformer_mt.inference.translator import Translator
from transformer_mt.model.kernels import onednn_available
from transformer_mt.model.output_rows import restricted_output
from transformer_mt.model.quantize import fp32_layer, linear_layers, quantize_int8

BOS, EOS, VOCAB = 1, 2, 50
OPTIONS = SearchOptions(max_len_a=0, max_len_b=12)
SEARCHES = {"greedy": lambda: GreedySearch(OPTIONS),
            "beam": lambda: BeamSearch(beam_size=3, nbest=2, length_norm=PowerLength(1.0), options=OPTIONS),
            "sampling": lambda: Sampling(seed=7, options=OPTIONS)}


def every_token(pad_id: int = 0) -> Shortlist:
    return Shortlist(torch.full((VOCAB, 1), -1), torch.arange(VOCAB), pad_id)


def some_tokens() -> Shortlist:
    """Three random candidates per source token, always the specials and token 7."""
    torch.manual_seed(3)
    return Shortlist(torch.randint(4, VOCAB, (VOCAB, 3)), torch.tensor([0, 1, 2, 3, 7]), 0)


def other_model() -> torch.nn.Module:
    model = make_model()
    torch.manual_seed(5)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


def on_onednn(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of `model` with every linear layer on oneDNN's fp32 path (what kernels=auto may choose)."""
    copied = copy.deepcopy(model).eval()
    for parent, name, linear in linear_layers(copied):
        setattr(parent, name, fp32_layer(linear, "onednn"))
    return copied


ONEDNN = pytest.mark.skipif(not onednn_available("fp32"), reason="this torch has no oneDNN")
MEMBERS = {"fp32": lambda m: [m], "int8": lambda m: [quantize_int8(m)], "ensemble": lambda m: [m, other_model()],
           "onednn": lambda m: [on_onednn(m)]}


def tokens(hyps) -> list[list[list[int]]]:
    return [[h.tokens for h in nbest] for nbest in hyps]


@pytest.mark.parametrize("tie, bias", [("all", False), ("none", True)])
def test_the_restricted_output_layer_is_those_columns_of_the_whole_one(tie, bias):
    model = make_model(tie_embeddings=tie, output_bias=bias)
    if bias:
        torch.nn.init.normal_(model.output_proj.bias)
    rows, states = torch.tensor([0, 5, 2, 49, 17]), torch.randn(3, 4, 32)
    with torch.no_grad():  # fp32: a product of 5 rows sums in another order than one of 50, to the last bits
        torch.testing.assert_close(restricted_output(model.output_proj, rows)(states),
                                   model.output_proj(states)[..., rows], rtol=1e-6, atol=1e-6)
        int8 = quantize_int8(model).output_proj  # int8: int32 sums, the same bits
        assert torch.equal(restricted_output(int8, rows)(states), int8(states)[..., rows])


@ONEDNN
def test_an_output_layer_on_onednn_has_its_restricted_form():
    model = make_model(tie_embeddings="none", output_bias=True)
    torch.nn.init.normal_(model.output_proj.bias)
    layer, rows, states = on_onednn(model).output_proj, torch.tensor([0, 5, 2, 49, 17]), torch.randn(3, 4, 32)
    with torch.no_grad():
        torch.testing.assert_close(restricted_output(layer, rows)(states), model.output_proj(states)[..., rows],
                                   rtol=1e-5, atol=1e-5)


def test_an_int8_layer_scaled_per_row_keeps_its_rows_int8_values_and_scales():
    layer = torch.nn.Linear(32, 50)
    qconfig = torch.ao.quantization.per_channel_dynamic_qconfig
    int8 = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(layer), {torch.nn.Linear: qconfig})[0]
    assert int8.weight().qscheme() == torch.per_channel_affine
    rows, states = torch.tensor([3, 0, 41]), torch.randn(6, 32)
    assert torch.equal(restricted_output(int8, rows)(states), int8(states)[:, rows])


def test_an_output_layer_without_a_restricted_form_is_one_line():
    with pytest.raises(ConfigError, match="decoding.shortlist=true: the output layer is a Identity"):
        restricted_output(torch.nn.Identity(), torch.tensor([0]))


@pytest.mark.parametrize("search", ["greedy", "beam"])
@pytest.mark.parametrize("kind", ["fp32", "int8", "ensemble"])
def test_a_shortlist_of_every_token_decodes_exactly_as_none(search, kind):
    model, src = make_model(), padded_sources()
    members = MEMBERS[kind](model)
    plain = members[0] if len(members) == 1 else Ensemble(members)
    expected = SEARCHES[search]()(plain, src, BOS, EOS)
    got = shortlisted_search(SEARCHES[search](), members, every_token().rows(src), src, BOS, EOS)
    assert tokens(got) == tokens(expected)
    assert [[h.score for h in nbest] for nbest in got] == [[h.score for h in nbest] for nbest in expected]


def test_prefixes_constraints_and_a_pad_that_is_not_id_0_decode_as_without_a_shortlist():
    src = padded_sources()
    prefix = torch.tensor([[9, 4], [11, 0], [0, 0], [30, 31]])
    constraints = [[(12, 13)], [], [(40,)], []]
    search = BeamSearch(beam_size=3, nbest=2, options=OPTIONS)
    model = make_model()
    for kwargs in ({"prefix_tokens": prefix}, {"constraints": constraints}):
        rows = every_token().rows(src)
        assert tokens(shortlisted_search(search, [model], rows, src, BOS, EOS, **kwargs)) == \
            tokens(search(model, src, BOS, EOS, **kwargs))
    # <pad> 3: the search reads padding from the sources shifted (column 0), and <pad> never comes out
    padded3 = make_model(pad_id=3)
    src3 = src.masked_fill(src == 0, 3).masked_fill(src == 3, 0)
    rows = every_token(pad_id=3).rows(src3)
    assert rows[0] == 3 and sorted(rows.tolist()) == list(range(VOCAB))
    for name in ("greedy", "beam"):
        assert tokens(shortlisted_search(SEARCHES[name](), [padded3], rows, src3, BOS, EOS)) == \
            tokens(SEARCHES[name]()(padded3, src3, BOS, EOS))


@pytest.mark.parametrize("search", sorted(SEARCHES))
@pytest.mark.parametrize("kind", ["fp32", "int8", "ensemble", pytest.param("onednn", marks=ONEDNN)])
def test_with_a_real_shortlist_every_output_token_is_a_row_of_its_batch(search, kind):
    model, src = make_model(), padded_sources()
    members = MEMBERS[kind](model)
    rows = some_tokens().rows(src)
    assert 10 < rows.numel() < VOCAB and rows[0] == 0
    present = set(src.flatten().tolist())
    assert set(rows.tolist()) == {0, 1, 2, 3, 7} | {t for s in present for t in some_tokens().candidates[s].tolist()}
    found = tokens(shortlisted_search(SEARCHES[search](), members, rows, src, BOS, EOS))
    assert {t for nbest in found for hyp in nbest for t in hyp} <= set(rows.tolist()) - {0}  # never <pad>
    assert any(hyp for nbest in found for hyp in nbest)


def test_forced_prefix_and_constraint_tokens_outside_the_candidates_still_come_out():
    model, src, shortlist = make_model(), padded_sources(), some_tokens()
    outside = sorted(set(range(4, VOCAB)) - set(shortlist.rows(src).tolist()))[:3]
    prefix = torch.tensor([[outside[0]], [0], [0], [0]])
    constraints = [[], [(outside[1], outside[2])], [], []]
    vocabularies = Vocabularies.__new__(Vocabularies)  # what the Translator reads of it: the special ids
    vocabularies.special_ids = lambda: {"pad_id": 0, "bos_id": BOS, "eos_id": EOS, "unk_id": 3}
    translator = Translator([model], vocabularies, BeamSearch(beam_size=3, options=OPTIONS), shortlist=shortlist)
    assert set(outside) <= set(shortlist.rows(src, forced_ids(prefix, constraints, src.device)).tolist())
    first = translator.hypotheses(src, prefix_tokens=prefix)
    assert first[0][0].tokens[0] == outside[0]
    found = translator.hypotheses(src, constraints=constraints)[1][0].tokens
    assert any(found[i : i + 2] == outside[1:] for i in range(len(found)))
