"""Lexical candidates of a parallel corpus, for a vocabulary shortlist (Marian's lexical shortlists,
CTranslate2's vocabulary map): in how many sentence pairs each source token and each target token
occur together, counted a chunk of encoded pairs at a time with numpy (memory grows with the
distinct pairs that co-occur, never with the corpus), then the `k` best target tokens of each source
token beyond the `frequent` most frequent target tokens. Knows nothing of the model.

Scoring (`SHORTLIST_SCORINGS`): probability, c(s, t) / c(s), the co-occurrence estimate of
p(t | s) (the target words that occur everywhere rank first, and the frequent set takes them);
dice, 2 c(s, t) / (c(s) + c(t)), which ranks rarer target words higher. c(.) counts sentence pairs,
each token once per sentence."""

from dataclasses import dataclass, field

import numpy as np

from transformer_mt.choices import SHORTLIST_SCORINGS
from transformer_mt.validate import check, integer, listing, one_of

MERGE_AT = 1 << 22  # pending pair counts merged into the total once they outnumber it and this


def sentence_tokens(ids: np.ndarray, lengths: np.ndarray, size: int, ignored: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(sentence, token) of every distinct token of each sentence, by sentence then token; `ids` the
    sentences end to end, `lengths` theirs, tokens in `ignored` left out."""
    sentence = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    keep = ~np.isin(ids, ignored)
    keys = np.unique(sentence[keep] * size + ids[keep].astype(np.int64))
    return keys // size, keys % size


def cross_pairs(src: tuple[np.ndarray, np.ndarray], tgt: tuple[np.ndarray, np.ndarray], sentences: int,
                tgt_size: int) -> np.ndarray:
    """source token x tgt_size + target token for every source token and target token of the same
    sentence (sentence_tokens' (sentence, token) of each side)."""
    (src_sentence, src_token), (tgt_sentence, tgt_token) = src, tgt
    per_sentence = np.bincount(tgt_sentence, minlength=sentences)
    start = np.cumsum(per_sentence) - per_sentence  # each sentence's first target token
    repeats = per_sentence[src_sentence]
    total = int(repeats.sum())
    first = np.repeat(np.cumsum(repeats) - repeats, repeats)
    within = np.arange(total, dtype=np.int64) - first
    targets = tgt_token[np.repeat(start[src_sentence], repeats) + within]
    return np.repeat(src_token, repeats) * tgt_size + targets


@dataclass
class Cooccurrence:
    """Counts over sentence pairs: `src` / `tgt`, the pairs holding each token on that side;
    `tokens`, every occurrence of each target token; `keys` (source x tgt_size + target, sorted) and
    `joint`, the pairs holding both. `ignored`: token ids never counted (specials)."""

    src_size: int
    tgt_size: int
    ignored: np.ndarray
    pairs: int = 0
    src: np.ndarray = field(init=False)
    tgt: np.ndarray = field(init=False)
    tokens: np.ndarray = field(init=False)
    keys: np.ndarray = field(init=False)
    joint: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.src, self.tgt = np.zeros(self.src_size, np.int64), np.zeros(self.tgt_size, np.int64)
        self.tokens = np.zeros(self.tgt_size, np.int64)
        self.keys, self.joint = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, src_ids: np.ndarray, src_lengths: np.ndarray, tgt_ids: np.ndarray, tgt_lengths: np.ndarray
            ) -> None:
        """Count a chunk of pairs: each side's ids end to end and the length of each sentence."""
        n = len(src_lengths)
        src = sentence_tokens(src_ids, src_lengths, self.src_size, self.ignored)
        tgt = sentence_tokens(tgt_ids, tgt_lengths, self.tgt_size, self.ignored)
        self.pairs += n
        self.src += np.bincount(src[1], minlength=self.src_size)
        self.tgt += np.bincount(tgt[1], minlength=self.tgt_size)
        counted = tgt_ids[~np.isin(tgt_ids, self.ignored)].astype(np.int64)
        self.tokens += np.bincount(counted, minlength=self.tgt_size)
        self.pending.append(np.unique(cross_pairs(src, tgt, n, self.tgt_size), return_counts=True))
        if sum(len(keys) for keys, _ in self.pending) > max(len(self.keys), MERGE_AT):
            self.merge()

    def merge(self) -> None:
        """The pending chunks' pair counts added into `keys` / `joint`."""
        if not self.pending:
            return
        keys = np.concatenate([self.keys, *(k for k, _ in self.pending)])
        counts = np.concatenate([self.joint, *(c for _, c in self.pending)])
        self.keys, inverse = np.unique(keys, return_inverse=True)
        self.joint = np.bincount(inverse, weights=counts).astype(np.int64)
        self.pending = []


@dataclass(frozen=True)
class LexicalTable:
    """`candidates` (source vocabulary size, k): each source token's best target tokens, best first,
    -1 where it has fewer; `frequent`: the most frequent target tokens, most frequent first."""

    candidates: np.ndarray
    frequent: np.ndarray
    pairs: int


def check_sizes(k: int, frequent: int, scoring: str) -> None:
    """The table's options, each named by its task key."""
    check("task.candidates", k, integer(1), "an integer >= 1")
    check("task.frequent", frequent, integer(0), "an integer >= 0")
    check("task.scoring", scoring, one_of(*SHORTLIST_SCORINGS), listing(SHORTLIST_SCORINGS))


def lexical_table(counts: Cooccurrence, k: int, frequent: int, scoring: str = "probability") -> LexicalTable:
    """The `frequent` most frequent target tokens (of those that occur), and each source token's `k`
    best other target tokens by `scoring` (ties: the smaller id first)."""
    check_sizes(k, frequent, scoring)
    counts.merge()
    ranked = np.argsort(-counts.tokens, kind="stable")
    common = ranked[: min(frequent, int((counts.tokens > 0).sum()))]
    source, target = counts.keys // counts.tgt_size, counts.keys % counts.tgt_size
    joint = counts.joint.astype(np.float64)
    if scoring == "dice":
        score = 2 * joint / (counts.src[source] + counts.tgt[target])
    else:
        score = joint / counts.src[source]
    keep = ~np.isin(target, common)
    source, target, score = source[keep], target[keep], score[keep]
    order = np.lexsort((target, -score, source))
    source, target = source[order], target[order]
    rank = np.arange(len(source)) - np.searchsorted(source, source, side="left")
    best = rank < k
    candidates = np.full((counts.src_size, k), -1, dtype=np.int64)
    candidates[source[best], rank[best]] = target[best]
    return LexicalTable(candidates, common.astype(np.int64), counts.pairs)
