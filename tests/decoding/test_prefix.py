"""Target prefixes: one forcing rule (SearchOptions.apply) that greedy, beam and sampling obey, per
sentence with prefixes of different lengths in one batch, the forced tokens' log-probabilities
counted in the score, exact on the hand-built model."""

import math

import pytest
import torch

from tests.decoding.toy_models import BOS, EOS, PAD, TABLE_1, TABLE_2, A, B, MarkovModel
from tests.helpers import make_model, padded_sources
from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength, Sampling, SearchOptions
from transformer_mt.decoding.search import TargetPrefix


def src_for(*tables: int) -> torch.Tensor:
    return torch.tensor([[t, 5, 5] for t in tables])


def prefixes(*rows: list[int]) -> torch.Tensor:
    """Prefix rows padded at the end with <pad>."""
    width = max(map(len, rows))
    return torch.tensor([row + [PAD] * (width - len(row)) for row in rows])


LIMIT = SearchOptions(max_len_a=0, max_len_b=6)
SEARCHES = {
    "greedy": lambda options=LIMIT: GreedySearch(options),
    "beam": lambda options=LIMIT: BeamSearch(beam_size=2, nbest=2, length_norm=PowerLength(0.0), options=options),
    "sampling": lambda options=LIMIT: Sampling(seed=0, nbest=3, options=options),
}


def test_the_rule_keeps_only_the_forced_token_with_the_models_log_probability():
    """SearchOptions.apply: a forced row has one finite entry, the model's own log-probability (also
    where another rule bans the token: n-grams, min_len); rows with -1 and steps with None are as
    without a prefix."""
    options = SearchOptions(min_len=5, no_repeat_ngram_size=1)
    lprobs = torch.log_softmax(torch.randn(3, 6), dim=-1)
    prefix = torch.tensor([[BOS, A], [BOS, A], [BOS, A]])  # A is banned by the 1-gram rule
    forced = torch.tensor([A, -1, EOS])  # EOS is banned by min_len
    got = options.apply(lprobs.clone(), prefix, 1, None, EOS, PAD, forced)
    assert torch.isfinite(got[0]).tolist() == [False, False, False, True, False, False]
    assert got[0, A] == lprobs[0, A] and got[2, EOS] == lprobs[2, EOS]
    assert torch.equal(got[1], options.apply(lprobs[1:2].clone(), prefix[1:2], 1, None, EOS, PAD)[0])
    assert torch.equal(options.apply(lprobs.clone(), prefix, 1, None, EOS, PAD, None),
                       options.apply(lprobs.clone(), prefix, 1, None, EOS, PAD))


def test_greedy_continues_a_prefix_and_counts_its_log_probability():
    """Table 1's greedy output is a a a ...; forced to start with b, it goes on as the model says
    after b (EOS), and the score includes P(b | BOS)."""
    model = MarkovModel({1: TABLE_1})
    free = GreedySearch(LIMIT)(model, src_for(1), BOS, EOS)[0][0]
    forced = GreedySearch(LIMIT)(model, src_for(1), BOS, EOS, prefixes([B]))[0][0]
    assert free.tokens == [A] * 6 and forced.tokens == [B]
    assert forced.logprob == pytest.approx(math.log(0.4 * 0.5)) and forced.score == forced.logprob


@pytest.mark.parametrize("name", ["greedy", "beam", "sampling"])
def test_a_free_first_token_counts_zero_and_the_rest_as_before(name):
    """free_prefix=1 (a target language's code, as generate's forced_bos_token_id counts it): table 1
    forced to start with a, then b: the score lacks log P(a | BOS) = log 0.5 and keeps the rest; the
    tokens are the same."""
    model = MarkovModel({1: TABLE_1})
    scored = SEARCHES[name]()(model, src_for(1), BOS, EOS, prefixes([A, B]))[0]
    free = SEARCHES[name]()(model, src_for(1), BOS, EOS, prefixes([A, B]), free_prefix=1)[0]
    assert [h.tokens for h in free] == [h.tokens for h in scored]
    assert [h.logprob for h in free] == pytest.approx([h.logprob - math.log(0.5) for h in scored])


def test_beam_search_with_a_prefix_by_hand():
    """Beam 2 without length normalization, prefix a: step 1 keeps a a (.225) and a b (.15); step 2
    finishes a b EOS (.075) and keeps a a a, a a b; step 3 finishes a a b EOS (.03375): two done.
    Without the prefix the best is b (.2), which does not start with a."""
    model = MarkovModel({1: TABLE_1})
    hyps = SEARCHES["beam"]()(model, src_for(1), BOS, EOS, prefixes([A]))[0]
    assert [h.tokens for h in hyps] == [[A, B], [A, A, B]]
    assert [h.logprob for h in hyps] == pytest.approx([math.log(0.5 * 0.3 * 0.5), math.log(0.5 * 0.45 * 0.3 * 0.5)])
    assert SEARCHES["beam"]()(model, src_for(1), BOS, EOS)[0][0].tokens == [B]


def test_every_sample_starts_with_the_prefix_and_is_scored_whole():
    model = MarkovModel({1: TABLE_1})
    samples = Sampling(seed=1, nbest=20, options=LIMIT)(model, src_for(1), BOS, EOS, prefixes([B, A]))[0]
    probability = {BOS: TABLE_1[BOS], A: TABLE_1[A], B: TABLE_1[B]}
    for hyp in samples:
        assert hyp.tokens[:2] == [B, A]
        path = [BOS, *hyp.tokens, EOS]
        assert hyp.logprob == pytest.approx(sum(math.log(probability[a][b]) for a, b in zip(path, path[1:])))
    assert len({tuple(h.tokens) for h in samples}) > 1  # after the prefix, the samples differ


@pytest.mark.parametrize("name", SEARCHES)
def test_prefixes_of_different_lengths_in_one_batch_are_each_as_alone(name):
    """Per sentence: no prefix, one token, two, three (rows of both tables); every output starts
    with its own prefix, and is what the sentence gives decoded alone (sampling: the samples of a
    batch are drawn together, so top-1 sampling is compared)."""
    model = MarkovModel({1: TABLE_1, 2: TABLE_2})
    rows = [[], [B], [A, B], [B, A, A], [A]]
    src = src_for(1, 2, 1, 2, 2)
    search = SEARCHES[name]()
    assert all(h.tokens[: len(row)] == row for row, n in zip(rows, search(model, src, BOS, EOS, prefixes(*rows)))
               for h in n)
    if name == "sampling":
        search = Sampling(top_k=1, seed=0, options=LIMIT)
    batched = search(model, src, BOS, EOS, prefixes(*rows))
    for i, row in enumerate(rows):
        assert batched[i] == search(model, src[i : i + 1], BOS, EOS, prefixes(row) if row else None)[0]


@pytest.mark.parametrize("name", SEARCHES)
def test_a_prefix_wins_over_every_other_rule(name):
    """Forced a a a repeats the bigram a a (no_repeat_ngram_size=2) and runs past max_len_b=2: the
    output is the prefix, then EOS forced at the raised limit (3), with its own probability."""
    model = MarkovModel({1: TABLE_1})
    options = SearchOptions(max_len_a=0, max_len_b=2, no_repeat_ngram_size=2)
    for hyp in SEARCHES[name](options)(model, src_for(1), BOS, EOS, prefixes([A, A, A]))[0]:
        assert hyp.tokens == [A, A, A]
        assert hyp.logprob == pytest.approx(math.log(0.5 * 0.45 * 0.45 * 0.25))


@pytest.mark.parametrize("check_every", [2, 3, 8])
def test_outputs_with_prefixes_do_not_depend_on_the_check_interval(check_every):
    model = MarkovModel({1: TABLE_1, 2: TABLE_2})
    src, given = src_for(2, 1, 2, 1), prefixes([B], [], [A, A], [B, B, A])
    for name, make in SEARCHES.items():
        every = make(SearchOptions(max_len_a=0, max_len_b=8, check_every=check_every))
        once = make(SearchOptions(max_len_a=0, max_len_b=8, check_every=1))
        if name == "sampling":  # draws depend on the interval: top-1 is the same at any
            every, once = (Sampling(top_k=1, seed=0, options=s.options) for s in (every, once))
        assert every(model, src, BOS, EOS, given) == once(model, src, BOS, EOS, given)


@pytest.mark.parametrize("name", ["greedy", "beam"])
def test_forcing_what_the_search_picks_anyway_changes_nothing_on_a_random_model(name):
    """Each sentence forced to start with the first tokens of its own best output (2 for some, 4
    for others) gets that output again, scored the same: forcing adds the forced log-probabilities,
    nothing else. With and without the cache."""
    model, src = make_model(), padded_sources()
    for use_cache in (True, False):
        options = SearchOptions(max_len_a=1.0, max_len_b=5, use_cache=use_cache)
        search = GreedySearch(options) if name == "greedy" else BeamSearch(beam_size=1, options=options)
        free = [n[0] for n in search(model, src, 1, 2)]
        given = [h.tokens[: 2 + 2 * (i % 2)] for i, h in enumerate(free)]
        forced = [n[0] for n in search(model, src, 1, 2, prefixes(*given))]
        assert [h.tokens for h in forced] == [h.tokens for h in free]
        assert [h.score for h in forced] == pytest.approx([h.score for h in free], abs=1e-5)


def test_a_prefix_wider_than_the_positions_is_refused():
    model = MarkovModel({1: TABLE_1}, max_positions=5)
    with pytest.raises(ValueError, match="prefix_tokens: 4 wide"):
        GreedySearch(LIMIT)(model, src_for(1), BOS, EOS, prefixes([A, A, A, A]))
    assert TargetPrefix.given(None, 3, model, torch.device("cpu")).at(0) is None
