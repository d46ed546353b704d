"""Lexically constrained beam search: exact hypotheses on the hand-built model, every finished
hypothesis contains every constraint (repeats too) on a random model, a sentence whose constraints
cannot fit gets its unconstrained output and is counted, prefixes keep working, and rows without
constraints decode exactly as without the argument."""

import math

import pytest
import torch

from tests.decoding.toy_models import BOS, EOS, TABLE_1, TABLE_2, A, B, MarkovModel
from tests.helpers import make_model, padded_sources
from transformer_mt.decoding import BeamSearch, PowerLength, SearchOptions
from transformer_mt.decoding.constraints import Progress


def toy_search(**kwargs) -> BeamSearch:
    return BeamSearch(beam_size=3, nbest=3, length_norm=PowerLength(0.0),
                      options=SearchOptions(max_len_a=0, max_len_b=6), **kwargs)


def contains_all(tokens: list[int], phrases: list[tuple[int, ...]]) -> bool:
    """Whether `tokens` hold every phrase at places that do not overlap (a phrase given twice: twice)."""
    if not phrases:
        return True
    first, rest = phrases[0], phrases[1:]
    for start in range(len(tokens) - len(first) + 1):
        if tuple(tokens[start : start + len(first)]) == first:
            if contains_all(tokens[:start] + [-1] * len(first) + tokens[start + len(first):], rest):
                return True
    return False


def test_exact_hypotheses_with_constraints_on_the_toy_model():
    model, src = MarkovModel({1: TABLE_1, 2: TABLE_2}), torch.tensor([[1, 5, 5], [2, 5, 5], [1, 5, 5]])
    search = toy_search()
    hyps = search(model, src, BOS, EOS, constraints=[[(A, A)], [], [(B,), (B, A)]])
    # "a a" EOS (0.5 * 0.45 * 0.25; unconstrained, "b" is best). Then the banks: at step 3 the three
    # beams go one to each bank (2, 1 and 0 constraint tokens met), so "a a a" goes on but "a a b"
    # does not, and "a a a" EOS, "a a a a" EOS finish next
    assert [h.tokens for h in hyps[0]] == [[A, A], [A, A, A], [A, A, A, A]]
    assert [h.score for h in hyps[0]] == pytest.approx([math.log(0.5 * 0.45 * 0.25), math.log(0.5 * 0.45**2 * 0.25),
                                                        math.log(0.5 * 0.45**3 * 0.25)])
    # "b" and "b a" both: "b a b" EOS (0.4 * 0.25 * 0.3 * 0.5) holds "b a" and another "b"
    assert hyps[2][0].tokens == [B, A, B] and hyps[2][0].score == pytest.approx(math.log(0.4 * 0.25 * 0.3 * 0.5))
    assert hyps[1] == search(model, src[1:2], BOS, EOS)[0]  # no constraints: beam search as it is
    assert search.unmet == 0


def test_progress_reads_a_token_every_way_it_can():
    phrases = [(B,), (B, A)]
    after = Progress.start(phrases)
    for token in (B, A, B):
        after = after.after(token)
    assert after.complete()  # b a b: "b a" then "b"
    partial = Progress.start(phrases).after(B).after(B)
    assert not partial.complete() and partial.tokens() == 2 and partial.wanted() == {A, B}


def test_every_hypothesis_holds_every_constraint_on_a_random_model():
    model, src = make_model(), padded_sources()
    torch.manual_seed(3)
    constraints = [[tuple(torch.randint(4, 50, (n,)).tolist()) for n in lengths]
                   for lengths in ([2], [1, 3], [2, 2], [1, 1])]
    constraints[3] = [constraints[3][0]] * 2  # a phrase that must appear twice
    search = BeamSearch(beam_size=4, nbest=4, options=SearchOptions(max_len_a=0, max_len_b=14))
    hyps = search(model, src, 1, 2, constraints=constraints)
    assert search.unmet == 0 and all(hyps)  # each sentence has hypotheses (some fewer than 4: the limit)
    for nbest, phrases in zip(hyps, constraints):
        assert all(contains_all(h.tokens, phrases) for h in nbest), (nbest, phrases)
        assert [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)
    plain = BeamSearch(beam_size=4, nbest=4, options=SearchOptions(max_len_a=0, max_len_b=14))(model, src, 1, 2)
    assert not all(contains_all(p[0].tokens, c) for p, c in zip(plain, constraints))  # they changed the outputs


def test_constraints_that_cannot_fit_give_the_unconstrained_output_counted():
    model, src = make_model(), padded_sources()
    options = SearchOptions(max_len_a=0, max_len_b=4)
    search = BeamSearch(beam_size=3, nbest=2, options=options)
    hyps = search(model, src, 1, 2, constraints=[[(5, 6, 7, 8, 9)], [], [], []])  # 5 tokens, limit 4
    plain = BeamSearch(beam_size=3, nbest=2, options=options)(model, src, 1, 2)
    assert search.unmet == 1 and [h.tokens for h in hyps[0]] == [h.tokens for h in plain[0]]
    assert [[h.tokens for h in n] for n in hyps[1:]] == [[h.tokens for h in n] for n in plain[1:]]


def test_a_target_prefix_and_constraints_together():
    model, src = make_model(), padded_sources()
    prefix = torch.tensor([[7, 8], [9, 0], [0, 0], [11, 12]])
    search = BeamSearch(beam_size=4, nbest=2, options=SearchOptions(max_len_a=0, max_len_b=12))
    constraints = [[(20, 21)], [(30,)], [(40, 41)], []]
    hyps = search(model, src, 1, 2, prefix_tokens=prefix, constraints=constraints)
    for row, (nbest, phrases) in enumerate(zip(hyps, constraints)):
        start = [t for t in prefix[row].tolist() if t]
        assert all(h.tokens[: len(start)] == start and contains_all(h.tokens, phrases) for h in nbest)


def test_without_constraints_beam_search_is_bit_identical():
    model, src = make_model(), padded_sources()
    options = SearchOptions(max_len_a=0, max_len_b=10)
    before = BeamSearch(beam_size=4, nbest=3, options=options)(model, src, 1, 2)
    flagged = BeamSearch(beam_size=4, nbest=3, options=options, constraints=True)
    assert flagged(model, src, 1, 2) == before and flagged(model, src, 1, 2, constraints=[[]] * 4) == before
