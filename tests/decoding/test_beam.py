"""Beam search: exact hypotheses on a hand-built model, beam 1 = greedy, cache = no cache."""

import math

import pytest
import torch

from tests.decoding.toy_models import BOS, EOS, TABLE_1, TABLE_2, A, B, MarkovModel
from tests.helpers import make_model, padded_sources
from transformer_mt.decoding import BeamSearch, GnmtLength, GreedySearch, Hypothesis, PowerLength, SearchOptions


def src_for(*tables: int) -> torch.Tensor:
    return torch.tensor([[t, 5, 5] for t in tables])


def test_exact_hypotheses_and_scores_without_length_penalty():
    model = MarkovModel({1: TABLE_1})
    hyps = BeamSearch(beam_size=2, nbest=2, length_norm=PowerLength(0.0),
                      options=SearchOptions(max_len_a=0, max_len_b=10))(model, src_for(1), BOS, EOS)
    # step 1 finishes "b" (0.4 * 0.5); step 2 finishes "a b" (0.5 * 0.3 * 0.5); then the sentence has 2
    assert [h.tokens for h in hyps[0]] == [[B], [A, B]]
    assert hyps[0][0].score == pytest.approx(math.log(0.4 * 0.5))
    assert hyps[0][1].score == pytest.approx(math.log(0.5 * 0.3 * 0.5))
    assert hyps[0][1].logprob == hyps[0][1].score


def test_length_penalty_reorders_by_normalized_score():
    model = MarkovModel({1: TABLE_1})
    hyps = BeamSearch(beam_size=2, nbest=2, length_norm=PowerLength(2.0),
                      options=SearchOptions(max_len_a=0, max_len_b=10))(model, src_for(1), BOS, EOS)
    # the same two finished hypotheses, scored logprob / len^2 with len counting EOS
    assert [h.tokens for h in hyps[0]] == [[A, B], [B]]
    assert hyps[0][0].score == pytest.approx(math.log(0.075) / 3**2)
    assert hyps[0][1].score == pytest.approx(math.log(0.2) / 2**2)
    assert hyps[0][0].logprob == pytest.approx(math.log(0.075))


def test_gnmt_length_norm_scores_by_hand():
    """The paper's normalization, ((5 + len) / 6) ** alpha, on the same two finished hypotheses."""
    alpha = 0.6
    model = MarkovModel({1: TABLE_1})
    search = BeamSearch(beam_size=2, nbest=2, length_norm=GnmtLength(alpha),
                        options=SearchOptions(max_len_a=0, max_len_b=10))
    hyps = search(model, src_for(1), BOS, EOS)[0]
    scores = {tuple(h.tokens): h.score for h in hyps}
    assert scores[(A, B)] == pytest.approx(math.log(0.075) / ((5 + 3) / 6) ** alpha)
    assert scores[(B,)] == pytest.approx(math.log(0.2) / ((5 + 2) / 6) ** alpha)
    assert BeamSearch().length_norm == PowerLength(1.0)  # fairseq's, the average log-probability


def test_the_decoding_configs_build_their_searches_with_one_options_object(tmp_path):
    """Every preset gives its search a SearchOptions; the beam preset a length normalization object."""
    from hydra.utils import instantiate

    from tests.helpers import compose_config
    from transformer_mt.decoding import Sampling

    for preset, cls in (("greedy", GreedySearch), ("beam", BeamSearch), ("sample", Sampling)):
        search = instantiate(compose_config(tmp_path, [f"decoding={preset}"]).decoding)
        assert type(search) is cls and type(search.options) is SearchOptions
    beam = instantiate(compose_config(tmp_path, ["decoding=beam"]).decoding)
    assert (beam.length_norm, beam.options.max_len_a, beam.options.max_len_b) == (PowerLength(0.6), 1.0, 50)
    paper = instantiate(compose_config(tmp_path, ["experiment=paper/wmt14_en_de_base"]).decoding)
    assert paper.length_norm == GnmtLength(0.6) and paper.options == SearchOptions(max_len_a=1.0, max_len_b=50)


def test_greedy_differs_and_beam_1_equals_greedy_on_the_toy_model():
    model = MarkovModel({1: TABLE_1})
    greedy = GreedySearch(options=SearchOptions(max_len_a=0, max_len_b=4))(model, src_for(1), BOS, EOS)
    assert greedy[0][0].tokens == [A, A, A, A]  # EOS forced at the limit
    assert greedy[0][0].logprob == pytest.approx(math.log(0.5 * 0.45**3 * 0.25))
    beam1 = BeamSearch(beam_size=1, length_norm=PowerLength(0.0),
                       options=SearchOptions(max_len_a=0, max_len_b=4))(model, src_for(1), BOS, EOS)
    assert beam1[0][0].tokens == greedy[0][0].tokens
    assert beam1[0][0].logprob == pytest.approx(greedy[0][0].logprob)


def test_finished_hypotheses_are_never_extended():
    model = MarkovModel({1: TABLE_1})
    BeamSearch(beam_size=3, length_norm=PowerLength(1.0),
               options=SearchOptions(max_len_a=0, max_len_b=8))(model, src_for(1), BOS, EOS)
    assert model.seen_prefixes
    assert all(EOS not in prefix for prefix in model.seen_prefixes)


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_drops_a_sentence_from_the_batch_when_it_ends(use_cache):
    """Table 2's greedy path ends after 3 tokens, table 1's runs to the limit of 8: after its EOS
    the short sentence is never extended, and each output is what it is decoded alone."""
    model = MarkovModel({1: TABLE_1, 2: TABLE_2})
    search = GreedySearch(options=SearchOptions(max_len_a=0, max_len_b=8, use_cache=use_cache))
    batched = search(model, src_for(2, 1, 2), BOS, EOS)
    assert all(EOS not in prefix for prefix in model.seen_prefixes)
    # after step 3 only the long sentence is decoded: one prefix of each length 4 ... 9 (BOS + 8 tokens)
    assert [len(p) for p in model.seen_prefixes if len(p) > 3] == [4, 5, 6, 7, 8, 9]
    assert batched == [search(model, src_for(t), BOS, EOS)[0] for t in (2, 1, 2)]
    assert batched[0][0].tokens == [B, A] and batched[1][0].tokens == [A] * 8


def test_sentences_of_one_batch_never_mix():
    model = MarkovModel({1: TABLE_1, 2: TABLE_2})
    search = BeamSearch(beam_size=3, nbest=3, length_norm=PowerLength(1.0),
                        options=SearchOptions(max_len_a=0, max_len_b=6))
    batched = search(model, src_for(1, 2, 1, 2), BOS, EOS)
    alone = [search(model, src_for(t), BOS, EOS)[0] for t in (1, 2, 1, 2)]
    assert batched == alone
    assert batched[0] != batched[1]


def test_max_and_min_length_and_no_repeat_ngrams():
    model = MarkovModel({1: TABLE_1})
    hyps = BeamSearch(beam_size=2, nbest=2,
                      options=SearchOptions(min_len=3, max_len_a=0, max_len_b=5))(model, src_for(1), BOS, EOS)
    assert all(3 <= len(h.tokens) <= 5 for h in hyps[0])
    greedy = GreedySearch(SearchOptions(max_len_a=0, max_len_b=6, no_repeat_ngram_size=2))
    hyps = greedy(model, src_for(1), BOS, EOS)
    tokens = hyps[0][0].tokens
    bigrams = list(zip(tokens, tokens[1:]))
    assert len(bigrams) == len(set(bigrams))
    search = BeamSearch(beam_size=2, nbest=2,
                        options=SearchOptions(max_len_a=0, max_len_b=6, no_repeat_ngram_size=2, min_len=4))
    for hyp in search(model, src_for(1), BOS, EOS)[0]:
        bigrams = list(zip(hyp.tokens, hyp.tokens[1:]))
        assert len(hyp.tokens) >= 4 and len(bigrams) == len(set(bigrams))
    # two symbols have only four bigrams: six tokens without a repeat are impossible
    impossible = BeamSearch(beam_size=2,
                            options=SearchOptions(max_len_a=0, max_len_b=8, no_repeat_ngram_size=2, min_len=6))
    assert impossible(model, src_for(1), BOS, EOS) == [[Hypothesis([], float("-inf"), float("-inf"))]]


@pytest.mark.parametrize("search_cls, options", [(GreedySearch, {}), (BeamSearch, {"beam_size": 4, "nbest": 4})])
def test_cache_equals_no_cache_on_a_random_model(search_cls, options):
    model = make_model()
    src = padded_sources()
    cached = search_cls(**options, options=SearchOptions(max_len_a=0, max_len_b=12))(model, src, 1, 2)
    plain = search_cls(**options, options=SearchOptions(max_len_a=0, max_len_b=12, use_cache=False))(model, src, 1, 2)
    for a, b in zip(cached, plain):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        for ha, hb in zip(a, b):
            assert ha.score == pytest.approx(hb.score, abs=1e-5)


def test_beam_1_equals_greedy_on_a_random_model():
    model = make_model()
    src = padded_sources()
    greedy = GreedySearch(options=SearchOptions(max_len_a=1.0, max_len_b=5))(model, src, 1, 2)
    beam = BeamSearch(beam_size=1, length_norm=PowerLength(0.0),
                      options=SearchOptions(max_len_a=1.0, max_len_b=5))(model, src, 1, 2)
    for g, b in zip(greedy, beam):
        assert g[0].tokens == b[0].tokens
        assert g[0].logprob == pytest.approx(b[0].logprob, abs=1e-5)


def test_batched_beam_equals_one_sentence_at_a_time_on_a_random_model():
    model = make_model()
    src = padded_sources()
    search = BeamSearch(beam_size=3, nbest=2, options=SearchOptions(max_len_a=0, max_len_b=10))
    batched = search(model, src, 1, 2)
    for row in range(src.size(0)):
        length = int((src[row] != 0).sum())
        alone = search(model, src[row : row + 1, :length], 1, 2)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[row]]


def test_every_search_forces_eos_at_the_limit_the_same_way():
    """At the length limit EOS is forced with its own probability, by one rule every search calls:
    greedy, beam 1 (no length penalty) and top-1 sampling give the same hypothesis and log-prob."""
    from transformer_mt.decoding import Sampling

    model = MarkovModel({1: TABLE_1})  # after `a`, greedy prefers `a` to EOS: it runs into the limit
    options = SearchOptions(max_len_a=0, max_len_b=4)
    greedy = GreedySearch(options)(model, src_for(1), BOS, EOS)[0][0]
    beam = BeamSearch(beam_size=1, length_norm=PowerLength(0.0), options=options)(model, src_for(1), BOS, EOS)[0][0]
    sample = Sampling(top_k=1, seed=0, options=options)(model, src_for(1), BOS, EOS)[0][0]
    assert greedy.tokens == beam.tokens == sample.tokens == [A, A, A, A]
    expected = math.log(0.5) + 3 * math.log(0.45) + math.log(0.25)  # ... then EOS with P(EOS | a) = 0.25
    assert greedy.logprob == pytest.approx(expected) and beam.logprob == pytest.approx(expected)
    assert sample.logprob == pytest.approx(expected)


def test_sampling_obeys_no_repeat_ngram_size_too():
    from transformer_mt.decoding import Sampling

    model = MarkovModel({1: TABLE_1})
    search = Sampling(seed=3, nbest=20, options=SearchOptions(max_len_a=0, max_len_b=6, no_repeat_ngram_size=2))
    for hyp in search(model, src_for(1), BOS, EOS)[0]:
        bigrams = list(zip(hyp.tokens, hyp.tokens[1:]))
        assert len(bigrams) == len(set(bigrams))


@pytest.mark.parametrize("use_cache", [True, False])
def test_decoder_state_tells_the_model_its_beams(use_cache):
    """The layout is explicit: k prefixes per sentence decode with beams=k, and with beams=1 the same
    rows are an error on the real model and on the toy one, though 2 x 3 divides evenly."""
    from transformer_mt.decoding.search import DecoderState

    for model in (make_model(), MarkovModel({1: TABLE_1, 2: TABLE_2})):
        src = src_for(1, 2)
        prefix = torch.full((6, 1), BOS)
        assert DecoderState(model, src, use_cache, beams=3).step(prefix).shape[0] == 6
        with pytest.raises(ValueError, match="beams=1"):
            DecoderState(model, src, use_cache).step(prefix)
