"""Paired significance tests of one system's translations against a baseline's, by sacreBLEU.

`paired_test` runs sacreBLEU's own tests (`sacrebleu.significance.PairedTest`): paired bootstrap
resampling (1,000 resamples) and paired approximate randomization (10,000 trials), on corpus BLEU
(cased, 13a), chrF or TER as the run scores them (sacreBLEU's defaults; TER: lower is better), or
BLEU on 13a-tokenized lowercased text (`bleu_tok_lc`, as `task.tokenized_bleu` scores it).
Both tests are two-sided. sacreBLEU reports each system's score and p-values; the 95% confidence
interval of the *difference* is computed here from the very resamples of its bootstrap (the same
seed, so the same sentence draws), with the sufficient statistics its test uses.

Two systems whose sentences all have the same statistics (identical outputs, or differences the
metric does not see) leave the tests nothing to find: every resample and every shuffle differs by 0,
and sacreBLEU then returns its smallest p-value, 1 / (n + 1) (0.0010 / 0.0001), which says nothing
about a difference. Such a pair is `identical`: not significant, and its p-values are not shown.
"""

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.metrics.base import Metric
from sacrebleu.significance import PairedTest

BOOTSTRAP_SAMPLES = 1000  # sacreBLEU's defaults
RANDOMIZATION_TRIALS = 10000
LEVEL = 0.05
METRICS: dict[str, tuple[str, Callable[[], Metric]]] = {  # name: (label, sacreBLEU metric)
    "bleu": ("BLEU", BLEU), "chrf": ("chrF", CHRF), "ter": ("TER", TER),
    # BLEU on 13a-tokenized lowercased text, as older papers report it (metrics.json: bleu_tok_lc)
    "bleu_tok_lc": ("BLEU (tokenized, lowercased)", lambda: BLEU(lowercase=True))}
LOWER_IS_BETTER = frozenset({"ter"})


def sacrebleu_metric(name: str) -> Metric:
    """A fresh sacreBLEU metric for `name` (bleu, chrf, ter or bleu_tok_lc)."""
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}: one of {', '.join(METRICS)}")
    return METRICS[name][1]()


@dataclass(frozen=True)
class PairedResult:
    """`system` against `baseline` on `metric`: the score of both, the difference (system -
    baseline), its 95% confidence interval by paired bootstrap, the two tests' p-values, and whether
    the two are identical to the metric (every sentence scored alike: the p-values mean nothing)."""

    baseline: float
    system: float
    ci_low: float
    ci_high: float
    p_bootstrap: float
    p_randomization: float
    metric: str = "bleu"
    identical: bool = False

    @property
    def delta(self) -> float:
        return self.system - self.baseline

    @property
    def gain(self) -> float:
        """The difference oriented so that > 0 means `system` is better (TER: -delta)."""
        return -self.delta if self.metric in LOWER_IS_BETTER else self.delta

    @property
    def significant(self) -> bool:
        """Both tests reject "no difference" at LEVEL (never for identical systems)."""
        return not self.identical and self.p_bootstrap < LEVEL and self.p_randomization < LEVEL


def sentence_statistics(hyps: list[str], references: list[str], metric: str = "bleu") -> np.ndarray:
    """The sufficient statistics of each sentence (a row each), as sacreBLEU's tests sum them."""
    return np.array(sacrebleu_metric(metric)._extract_corpus_statistics(hyps, [references]), dtype="float32")


@contextmanager
def quiet_sacrebleu() -> Iterator[None]:
    """sacreBLEU's INFO lines (six for every pair of tests) held back while the tests run."""
    logger = logging.getLogger("sacrebleu")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def sacrebleu_p_value(baseline: list[str], system: list[str], references: list[str], test_type: str,
                      n_samples: int, metric: str = "bleu") -> tuple[float, float, float]:
    """(baseline score, system score, p-value) from sacreBLEU's PairedTest ("bs" or "ar") on `metric`."""
    with quiet_sacrebleu():
        _, scores = PairedTest([("baseline", baseline), ("system", system)], {metric: sacrebleu_metric(metric)},
                               [references], test_type=test_type, n_samples=n_samples)()
    (name,) = [key for key in scores if key != "System"]  # sacreBLEU's own name, e.g. chrF2
    base, result = scores[name]
    return base.score, result.score, result.p_value


def difference_interval(baseline: list[str], system: list[str], references: list[str],
                        n_samples: int, metric: str = "bleu", stats: list[np.ndarray] | None = None
                        ) -> tuple[float, float]:
    """The 95% interval of score(system) - score(baseline) over the paired bootstrap's resamples,
    drawn as sacreBLEU's PairedTest draws them (its seed, $SACREBLEU_SEED or 12345), with the
    bounds sacreBLEU's own `estimate_ci` takes (the n // 40-th sample from each end)."""
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    rng = np.random.default_rng(None if seed.lower() == "none" else int(seed))
    idxs = rng.choice(len(system), size=(n_samples, len(system)), replace=True)
    scorer = sacrebleu_metric(metric)
    if stats is None:  # each side's sentence statistics (paired_test has them already)
        stats = [sentence_statistics(hyps, references, metric) for hyps in (baseline, system)]
    base, other = (np.array([scorer._compute_score_from_stats(s[i].sum(0)).score for i in idxs]) for s in stats)
    diffs = np.sort(other - base)
    low = n_samples // 40
    return float(diffs[low]), float(diffs[n_samples - low - 1])


def paired_test(baseline: list[str], system: list[str], references: list[str],
                n_bootstrap: int = BOOTSTRAP_SAMPLES, n_randomization: int = RANDOMIZATION_TRIALS,
                metric: str = "bleu") -> PairedResult:
    """Both of sacreBLEU's paired tests of `system` against `baseline` on the same `references`,
    on `metric` (bleu, chrf or ter)."""
    if not len(baseline) == len(system) == len(references):
        raise ValueError(f"{len(baseline)} baseline, {len(system)} system and {len(references)} reference lines")
    base_score, score, p_bootstrap = sacrebleu_p_value(baseline, system, references, "bs", n_bootstrap, metric)
    _, _, p_randomization = sacrebleu_p_value(baseline, system, references, "ar", n_randomization, metric)
    stats = [sentence_statistics(hyps, references, metric) for hyps in (baseline, system)]
    low, high = difference_interval(baseline, system, references, n_bootstrap, metric, stats)
    identical = baseline == system or np.array_equal(*stats)
    return PairedResult(base_score, score, low, high, p_bootstrap, p_randomization, metric, identical)
