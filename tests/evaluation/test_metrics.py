"""Our corpus scores equal sacreBLEU's."""

import random

import pytest
import sacrebleu

from transformer_mt.evaluation.metrics import corpus_scores


def corpus():
    rng = random.Random(0)
    words = "the a dog cat sat on mat , . ! runs big small red Haus über".split()
    refs = [" ".join(rng.choices(words, k=rng.randint(3, 15))) for _ in range(200)]
    hyps = [" ".join(w if rng.random() < 0.7 else rng.choice(words) for w in r.split()) for r in refs]
    return hyps, refs


def test_bleu_and_chrf_equal_sacrebleu():
    hyps, refs = corpus()
    scores = corpus_scores(hyps, refs)
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], smooth_method="none").score, abs=1e-4)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score, abs=1e-9)
    assert "tok:13a" in scores["bleu_signature"] and "smooth:none" in scores["bleu_signature"]
    assert "nc:6|nw:0" in scores["chrf_signature"]


def test_perfect_and_mismatched():
    assert corpus_scores(["a b c d e"], ["a b c d e"])["bleu"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="2 hypotheses for 1 references"):
        corpus_scores(["a", "b"], ["a"])
