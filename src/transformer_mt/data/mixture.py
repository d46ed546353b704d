"""Several training corpora in one epoch: which pairs of each an epoch shows.

The corpora's training splits are encoded each into its own cache entry and read as one table, the
corpora end to end (`offsets`). Corpus i of n_i pairs and weight w_i shows w_i x n_i pairs an epoch:
every pair floor(w_i) times, and a different round(frac(w_i) x n_i) of its pairs once more, drawn
without replacement from (seed, epoch, i). So a weight of 2 shows every pair twice, 0.5 a different
half each epoch, 0 none (a corpus only evaluated on). With a temperature T the weights are first
rescaled so that corpus i's share of the epoch is p_i ∝ (w_i n_i)^(1/T) (the multilingual convention;
T=1 keeps the weights, a large T tends to equal shares), the epoch keeping sum_i w_i n_i pairs.
"""

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from transformer_mt.data.corpus import CORPUS_KEY, CleanPairs, Corpus, ParallelText, sample_pairs
from transformer_mt.data.encoding import counted, pairs_bar
from transformer_mt.data.tokenizer import tag_token
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.validate import check, number


@dataclass(frozen=True)
class Share:
    """What one corpus contributes to every epoch."""

    name: str
    pairs: int  # its training pairs (after the length filter)
    weight: float  # the effective weight (after the temperature)

    @property
    def shown(self) -> int:
        """Pairs of it an epoch shows."""
        return int(self.weight) * self.pairs + round((self.weight % 1) * self.pairs)


def tempered(weights: list[float], pairs: list[int], temperature: float | None) -> list[float]:
    """The weights that give corpus i the share p_i ∝ (w_i n_i)^(1/T) of an epoch of sum_i w_i n_i
    pairs (the weights as given when `temperature` is None)."""
    if temperature is None:
        return list(weights)
    sizes = np.asarray(weights, dtype=np.float64) * np.asarray(pairs, dtype=np.float64)
    total = sizes.sum()
    if total == 0:
        return list(weights)
    shares = np.where(sizes > 0, sizes, 0.0) ** (1.0 / temperature)
    shares /= shares.sum()
    return [float(share * total / n) if n else 0.0 for share, n in zip(shares, pairs)]


# a data config that still names its corpus `corpus` (before data.corpora held every corpus)
OLD_SPELLING = ("data.corpus: the corpus is now an entry of data.corpora, named as every other one "
                "(data.corpora.NAME: {_target_: ..., ...}; data=toy names its data.corpora.toy); see docs/data.md")


def corpus_key(name: str) -> str:
    """The config key of the run's corpus `name`: data.corpora.NAME."""
    return f"data.corpora.{name}"


@contextmanager
def naming(name: str) -> Iterator[None]:
    """A block whose DataError names corpus `name`'s keys where it says data.corpora.NAME. (a corpus
    does not know under which name it was given)."""
    try:
        yield
    except DataError as err:
        raise DataError(str(err).replace(f"{CORPUS_KEY}.", f"{corpus_key(name)}.")) from None


def refuse_old_spelling(data: Mapping) -> None:
    """A ConfigError (one line naming data.corpora) for a data config that still sets `corpus`."""
    if "corpus" in data:
        raise ConfigError(OLD_SPELLING)


def checked_corpora(corpora: Mapping | None) -> dict[str, Corpus]:
    """The run's corpora by name, in their order (data.corpora; an entry set to null is left out),
    each a corpus with a weight >= 0 and tags that are one word, at least one with a weight > 0."""
    if corpora is not None and not isinstance(corpora, Mapping):
        raise ConfigError(f"data.corpora: a mapping of names to corpora (data.corpora.NAME: {{_target_: ...}}), "
                          f"not a {type(corpora).__name__}")
    named = {str(name): each for name, each in (corpora or {}).items() if each is not None}
    if not named:
        raise ConfigError("data.corpora is empty: name a corpus (e.g. data=toy, or data.corpora.NAME={_target_: ...})")
    for name, each in named.items():
        key = corpus_key(name)
        if not isinstance(each, Corpus):  # a node that Hydra did not build into a corpus
            raise ConfigError(f"{key}: not a corpus: its node needs a _target_, the corpus class "
                              "(e.g. _target_: transformer_mt.data.TextFileCorpus, as in docs/data.md)")
        check(f"{key}.weight", each.weight, number(0.0), "a number >= 0")
        for field in ("tag", "target_tag"):
            if getattr(each, field) is not None:
                tag_token(getattr(each, field), f"{key}.{field}")
    if not any(each.weight > 0 for each in named.values()):
        raise ConfigError("data.corpora: every corpus has weight 0: nothing to train on")
    return named


def corpus_tokens(table, counts: list[int]) -> list[int]:
    """Each corpus's tokens (source and target) in a training table of the corpora end to end
    (`counts`: the pairs of each)."""
    lengths = table.with_format("numpy", columns=["src_len", "tgt_len"])[:]
    tokens = np.concatenate([[0], np.cumsum(lengths["src_len"].astype(np.int64) + lengths["tgt_len"])])
    return np.diff(tokens[np.cumsum([0, *counts])]).tolist()


class Mixture:
    """The rows of the corpora's concatenated training table that each epoch shows (`rows(epoch)`),
    from (seed, epoch) alone: every rank of a DDP run, and a resumed run, get the same ones."""

    def __init__(self, names: list[str], pairs: list[int], weights: list[float], temperature: float | None = None,
                 seed: int = 0, tokens: list[int] | None = None) -> None:
        """`tokens`: each corpus's tokens (source and target), for the composition (None: not known)."""
        self.shares = [Share(name, n, w) for name, n, w in zip(names, pairs, tempered(weights, pairs, temperature))]
        self.offsets = np.concatenate([[0], np.cumsum(pairs)]).astype(np.int64)
        self.seed, self.tokens = seed, tokens or [0] * len(pairs)
        if sum(share.shown for share in self.shares) == 0:
            raise ConfigError("data.corpora: every training corpus has weight 0 (or no pairs): an epoch would be empty")

    @property
    def plain(self) -> bool:
        """Whether every epoch is every pair once, in table order (one corpus of weight 1)."""
        return all(share.weight == 1 for share in self.shares)

    def rows(self, epoch: int) -> np.ndarray:
        """The table rows epoch `epoch` shows, corpus by corpus (the batch sampler orders them)."""
        parts = []
        for i, share in enumerate(self.shares):
            start, n = int(self.offsets[i]), share.pairs
            whole, extra = int(share.weight), round((share.weight % 1) * n)
            parts.extend([np.arange(start, start + n, dtype=np.int64)] * whole)
            if extra:
                rng = np.random.default_rng([self.seed, epoch, i])
                parts.append(np.sort(rng.choice(n, size=extra, replace=False)).astype(np.int64) + start)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def composition(self) -> dict[str, dict[str, float]]:
        """Each corpus's share of an epoch: the pairs it shows, of how many, its weight, and about how
        many tokens."""
        return {share.name: {"pairs": share.shown, "of": share.pairs, "weight": share.weight,
                             "tokens": round(tokens / share.pairs * share.shown) if share.pairs else 0}
                for share, tokens in zip(self.shares, self.tokens)}

    def describe(self, unused: list[str] = ()) -> str:
        """One line per corpus: the pairs (and tokens) an epoch shows of it, and its weight; then
        the `unused` ones (weight 0), which only validate and test."""
        lines = [f"  {name}: {c['pairs']} pairs of {c['of']} (weight {c['weight']:.4g}), about {c['tokens']} tokens"
                 for name, c in self.composition().items()]
        return "\n".join(lines + [f"  {name}: none (weight 0: validation and test only)" for name in unused])


def training_sample(streams: Iterable[CleanPairs], weights: list[float], size: int | None,
                    progress: bool | None) -> tuple[ParallelText, int]:
    """One pass over each training corpus's stream (every line checked, a seeded sample of `size`
    kept), then their weighted_sample; and the pairs seen in all."""
    samples = []
    for pairs in streams:
        with pairs_bar(f"{pairs.name}: reading", pairs, progress) as bar:
            samples.append(sample_pairs(counted(pairs, bar), size))
    return weighted_sample(samples, weights, size), sum(sample.stats["pairs"] for sample in samples)


def weighted_sample(samples: list[ParallelText], weights: list[float], size: int | None, seed: int = 0) -> ParallelText:
    """The text a joint vocabulary is trained on, from each training corpus's sample (`samples`,
    each with stats["pairs"]: the pairs it was drawn from): corpus i gets the share of the `size`
    pairs (all, when None or more) that it has of an epoch, w_i n_i / sum_j w_j n_j, so a small corpus
    is not drowned by a large one and a weight of 2 counts twice. Its pairs come from its sample
    (repeated when it has fewer), in their order. One corpus of weight 1: its sample as it is."""
    if len(samples) == 1 and weights[0] == 1:
        return samples[0]
    shown = np.array([w * sample.stats["pairs"] for w, sample in zip(weights, samples)], dtype=np.float64)
    total = shown.sum()
    wanted = total if size is None else min(float(size), total)
    src, tgt = [], []
    for i, (sample, share) in enumerate(zip(samples, shown)):
        count, have = round(wanted * share / total) if total else 0, len(sample)
        if not have:
            continue
        rng = np.random.default_rng([seed, i])
        picked = np.concatenate([np.tile(np.arange(have), count // have),
                                 np.sort(rng.choice(have, size=count % have, replace=False))])
        src += [sample.src[k] for k in picked.tolist()]
        tgt += [sample.tgt[k] for k in picked.tolist()]
    return ParallelText(src, tgt, stats={"pairs": int(sum(sample.stats["pairs"] for sample in samples))})
