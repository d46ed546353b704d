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


def test_bleu_chrf_and_ter_equal_sacrebleu():
    hyps, refs = corpus()
    scores = corpus_scores(hyps, refs)
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], smooth_method="none").score, abs=1e-4)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score, abs=1e-9)
    assert "tok:13a" in scores["bleu_signature"] and "smooth:none" in scores["bleu_signature"]
    assert "nc:6|nw:0" in scores["chrf_signature"]
    assert scores["ter"] == pytest.approx(sacrebleu.corpus_ter(hyps, [refs]).score, abs=1e-9) and scores["ter"] > 0
    assert "case:lc|tok:tercom|norm:no|punct:yes" in scores["ter_signature"]
    assert corpus_scores(refs, refs)["ter"] == 0.0


def test_perfect_and_mismatched():
    assert corpus_scores(["a b c d e"], ["a b c d e"])["bleu"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="2 hypotheses for 1 references"):
        corpus_scores(["a", "b"], ["a"])


def test_compound_split_bleu_splits_hyphens_as_get_ende_bleu_did():
    """'Euro-Zone' -> 'Euro ##AT##-##AT## Zone' on both sides, after 13a tokenization, cased."""
    import sacrebleu

    from transformer_mt.evaluation.metrics import compound_split_bleu

    hyp, ref = "Die Euro-Zone wächst, sagt die EU-Kommission.", "Die Euro-Zone wächst schnell, sagt die Kommission."
    split_hyp = "Die Euro ##AT##-##AT## Zone wächst , sagt die EU ##AT##-##AT## Kommission ."
    split_ref = "Die Euro ##AT##-##AT## Zone wächst schnell , sagt die Kommission ."
    expected = sacrebleu.corpus_bleu([split_hyp], [[split_ref]], tokenize="none", smooth_method="none").score
    assert compound_split_bleu([hyp], [ref])["bleu_tok_compound"] == expected > 0
