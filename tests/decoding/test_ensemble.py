"""Ensembles (decoding/ensemble.py): a model ensembled with itself decodes exactly as it does
alone; two models give the hand-computed average of their probabilities at each step."""

import math

import pytest
import torch

from tests.helpers import make_model, padded_sources
from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength, Sampling, SearchOptions
from transformer_mt.decoding.ensemble import Ensemble

BOS, EOS = 1, 2
OPTIONS = SearchOptions(max_len_a=0, max_len_b=12)
SEARCHES = {"greedy": lambda: GreedySearch(OPTIONS),
            "beam": lambda: BeamSearch(beam_size=3, nbest=2, length_norm=PowerLength(1.0), options=OPTIONS),
            "sampling": lambda: Sampling(seed=7, options=OPTIONS)}


@pytest.mark.parametrize("search", sorted(SEARCHES))
def test_a_model_ensembled_with_itself_decodes_as_it_does_alone(search):
    model, src = make_model(), padded_sources()
    alone = SEARCHES[search]()(model, src, BOS, EOS)
    twice = SEARCHES[search]()(Ensemble([model, model]), src, BOS, EOS)
    assert [[h.tokens for h in nbest] for nbest in twice] == [[h.tokens for h in nbest] for nbest in alone]
    for a, b in zip(alone, twice):
        assert [h.score for h in b] == pytest.approx([h.score for h in a], abs=1e-5)


def test_two_models_average_their_probabilities_at_every_step():
    """fairseq's rule, by hand: log((p1 + p2) / 2) for the first output token, and greedy search
    takes its argmax; with and without the cache the ensemble's beam outputs agree."""
    first, second = make_model(), make_model()
    torch.manual_seed(5)
    for p in second.parameters():
        p.data.add_(0.3 * torch.randn_like(p))
    src = padded_sources()
    bos = torch.full((src.size(0), 1), BOS)
    by_hand = torch.log((first(src, bos).softmax(-1) + second(src, bos).softmax(-1)) / 2)[:, -1]
    ensemble = Ensemble([first, second])
    got = ensemble.decode(bos, ensemble.encode(src), src)[:, -1]
    torch.testing.assert_close(got, by_hand, atol=1e-6, rtol=1e-6)
    assert got.exp().sum(-1).sub(1).abs().max() < 1e-5  # a distribution
    greedy = GreedySearch(SearchOptions(max_len_a=0, max_len_b=1, min_len=1))(ensemble, src, BOS, EOS)
    assert [h[0].tokens[0] for h in greedy] == by_hand.argmax(-1).tolist()
    assert greedy[0][0].logprob == pytest.approx(float(by_hand[0].max()) + float(
        ensemble.decode(torch.tensor([[BOS, greedy[0][0].tokens[0]]]), ensemble.encode(src[:1]), src[:1])[0, -1, EOS]),
        abs=1e-5)
    beams = [BeamSearch(beam_size=3, options=SearchOptions(max_len_a=0, max_len_b=10, use_cache=cache))(
        ensemble, src, BOS, EOS) for cache in (True, False)]
    assert [h[0].tokens for h in beams[0]] == [h[0].tokens for h in beams[1]]
    assert math.isfinite(beams[0][0][0].score)


def test_an_ensemble_scores_teacher_forced_as_the_average():
    first, second = make_model(), make_model(dropout=0.0)
    torch.manual_seed(6)
    for p in second.parameters():
        p.data.add_(0.3 * torch.randn_like(p))
    src, tgt = padded_sources(), torch.randint(4, 50, (4, 5))
    expected = torch.log((first(src, tgt).softmax(-1) + second(src, tgt).softmax(-1)) / 2)
    torch.testing.assert_close(Ensemble([first, second])(src, tgt), expected, atol=1e-6, rtol=1e-6)
