"""Corpus BLEU, chrF and TER on detokenized text, with sacreBLEU signatures.

BLEU: torchmetrics' SacreBLEUScore (13a tokenization, mixed case, no smoothing), which equals
`sacrebleu.corpus_bleu(..., smooth_method="none")`. chrF: sacreBLEU's CHRF with its defaults
(character 6-grams, beta 2). torchmetrics' CHRFScore averages per-order F-scores instead, which
does not match sacreBLEU's default chrF, so it is not used. TER: sacreBLEU's TER with its defaults
(case-insensitive, tercom tokenization, no normalization; lower is better).
"""

import re

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from torchmetrics.text import SacreBLEUScore

_COMPOUND = re.compile(r"(\S)-(\S)")


def signature(metric: BLEU | CHRF | TER) -> str:
    """The sacreBLEU signature of a metric configured as ours, with one reference per sentence."""
    metric.num_refs = 1
    return str(metric.get_signature())


def bleu_signature() -> str:
    return signature(BLEU(tokenize="13a", smooth_method="none"))


def chrf_signature() -> str:
    return signature(CHRF())


def ter_signature() -> str:
    return signature(TER())


def tokenized_lowercased_bleu(hypotheses: list[str], references: list[str]) -> dict[str, float | str]:
    """BLEU on 13a-tokenized, lowercased text, as older papers computed it with multi-bleu.perl on
    tokenized lowercase output. Not sacreBLEU's cased BLEU: report it only beside that one."""
    bleu = SacreBLEUScore(tokenize="13a", lowercase=True, smooth=False)
    return {
        "bleu_tok_lc": 100.0 * float(bleu(hypotheses, [[r] for r in references])),
        "bleu_tok_lc_signature": signature(BLEU(tokenize="13a", lowercase=True, smooth_method="none")),
    }


def compound_split_bleu(hypotheses: list[str], references: list[str]) -> dict[str, float | str]:
    """BLEU as the Transformer paper reported it for English-German (tensor2tensor's get_ende_bleu.sh):
    cased, on tokenized text whose hyphenated compounds are split ("a-b" -> "a ##AT##-##AT## b").
    sacreBLEU's 13a tokenizer stands in for Moses' tokenizer.perl. Not comparable with sacreBLEU:
    report it only beside that one."""
    tokenize = Tokenizer13a()

    def split(text: str) -> str:
        return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", tokenize(text))

    score = BLEU(tokenize="none", smooth_method="none").corpus_score([split(h) for h in hypotheses],
                                                                     [[split(r) for r in references]])
    return {"bleu_tok_compound": score.score,
            "bleu_tok_compound_signature": signature(BLEU(tokenize="none", smooth_method="none"))}


def corpus_scores(hypotheses: list[str], references: list[str]) -> dict[str, float | str]:
    """BLEU, chrF and TER (0-100; TER: edits per reference word, lower is better) of hypotheses
    against one reference each, and their signatures."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    if not hypotheses:
        raise ValueError("no hypotheses to score")
    bleu = SacreBLEUScore(tokenize="13a", lowercase=False, smooth=False)
    return {
        "bleu": 100.0 * float(bleu(hypotheses, [[r] for r in references])),
        "chrf": CHRF().corpus_score(hypotheses, [references]).score,
        "ter": TER().corpus_score(hypotheses, [references]).score,
        "bleu_signature": bleu_signature(),
        "chrf_signature": chrf_signature(),
        "ter_signature": ter_signature(),
    }


_SENTENCE_BLEU = BLEU(tokenize="13a", smooth_method="exp", effective_order=True)


def sentence_bleu(hypothesis: str, reference: str) -> float:
    """sacreBLEU's sentence-level BLEU (13a, exponential smoothing, effective order): for tables of
    single translations, never for corpus scores."""
    return _SENTENCE_BLEU.sentence_score(hypothesis, [reference]).score
