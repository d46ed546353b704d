"""Sampling: top_k=1 is greedy, top_p keeps exactly the nucleus, seeds reproduce, and samples
follow the model's distribution."""

import math

import pytest
import torch

from tests.decoding.toy_models import BOS, EOS, MarkovModel
from tests.helpers import make_model, padded_sources
from transformer_mt.decoding import GreedySearch, Sampling, SearchOptions
from transformer_mt.decoding.sampling import top_k_filter, top_p_filter


def test_top_k_1_equals_greedy():
    model = make_model()
    src = padded_sources()
    greedy = GreedySearch(options=SearchOptions(max_len_a=1.0, max_len_b=5))(model, src, 1, 2)
    sampled = Sampling(top_k=1, seed=3, options=SearchOptions(max_len_a=1.0, max_len_b=5))(model, src, 1, 2)
    assert [h[0].tokens for h in sampled] == [h[0].tokens for h in greedy]


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([0.05, 0.4, 0.1, 0.3, 0.15])
    logits = probs.log()
    kept = lambda p: set(torch.isfinite(top_p_filter(logits, p)).nonzero().flatten().tolist())  # noqa: E731
    assert kept(0.4) == {1}  # 0.4 alone reaches 0.4
    assert kept(0.41) == {1, 3}
    assert kept(0.7) == {1, 3}  # 0.4 + 0.3 reaches 0.7 exactly
    assert kept(0.71) == {1, 3, 4}
    assert kept(0.95) == {1, 3, 4, 2}
    assert kept(0.96) == {0, 1, 2, 3, 4}
    batch = torch.stack([logits, logits.flip(0)])
    assert torch.isfinite(top_p_filter(batch, 0.5)).sum(1).tolist() == [2, 2]


def test_top_k_filter():
    logits = torch.tensor([[1.0, 4.0, 3.0, 2.0]])
    assert torch.isfinite(top_k_filter(logits, 2)).tolist() == [[False, True, True, False]]
    assert torch.equal(top_k_filter(logits, 0), logits)


def test_a_fixed_seed_reproduces_samples():
    model = make_model()
    src = padded_sources()
    a = Sampling(seed=7, nbest=3, options=SearchOptions(max_len_a=1.0, max_len_b=5))(model, src, 1, 2)
    b = Sampling(seed=7, nbest=3, options=SearchOptions(max_len_a=1.0, max_len_b=5))(model, src, 1, 2)
    c = Sampling(seed=8, nbest=3, options=SearchOptions(max_len_a=1.0, max_len_b=5))(model, src, 1, 2)
    assert a == b and a != c
    assert all(len(n) == 3 for n in a)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_samples_follow_the_model_distribution(temperature):
    """First tokens of many samples against P(first token) ** (1/T), by a chi-square statistic."""
    probs = {3: 0.1, 4: 0.2, 5: 0.3, 6: 0.25, 7: 0.15}
    table = {BOS: probs, **{t: {EOS: 1.0} for t in probs}}
    model = MarkovModel({1: table}, vocab=8)
    n = 20000
    src = torch.tensor([[1, 5]]).expand(n, -1)
    hyps = Sampling(temperature=temperature, seed=0,
                    options=SearchOptions(max_len_a=0, max_len_b=3))(model, src, BOS, EOS)
    counts = torch.bincount(torch.tensor([h[0].tokens[0] for h in hyps]), minlength=8)[3:].double()
    sharpened = torch.tensor([p ** (1 / temperature) for p in probs.values()], dtype=torch.float64)
    expected = n * sharpened / sharpened.sum()
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 18.47  # 4 degrees of freedom, p = 0.001
    assert all(math.isclose(h[0].logprob, math.log(probs[h[0].tokens[0]]), rel_tol=1e-5) for h in hyps[:50])


