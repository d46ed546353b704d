"""Subword regularization in the training data path (`data.tokenizer.dropout=p`): BPE-dropout for a
`tokenizers` BPE vocabulary, sentencepiece's own sampling for a sentencepiece one.

BPE-dropout (Provilkov et al. 2020) segments each training sentence anew every epoch, dropping each
BPE merge with probability p, so the model sees many segmentations of a word. Here it is done on the
cached token ids, not on the text: a token that a merge made is split back into the two tokens the
merge joined with probability p, and each token so exposed again, down the merge tree (each node of
a word's merge tree dropped once, independently). That gives the finer segmentations of the
deterministic one at the cost of a few vectorized passes over the ids; unlike dropping merges while
merging, it never yields a segmentation the deterministic merges do not pass through.

The draws are a hash of (seed, epoch, side, row, depth, position) (splitmix64), not a stream: the
batch sampler (which needs every sentence's length to fill its token budget), each DataLoader worker
(which re-segments only its batch's rows) and every DDP rank compute the same segmentation for a
row, and a resumed run the same as the run it continues. The cache keeps the deterministic ids;
validation, test and decoding never see dropout.

A sentencepiece vocabulary samples with sentencepiece itself (PieceSampling: Kudo 2018's unigram
sampling, or BPE-dropout for a sentencepiece BPE model), each row's draw seeded from the same hash
of (seed, epoch, side, row), so the same guarantees hold.
"""

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import sentencepiece as spm

from transformer_mt.data.batching import flat_lists
from transformer_mt.data.tokenizer import SentencePieceTokenizer
from transformer_mt.errors import ConfigError
from transformer_mt.validate import PROBABILITY, check

GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # splitmix64's increment


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: uint64 -> well-mixed uint64 (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def uniforms(key: int, rows: np.ndarray, depth: int, positions: np.ndarray) -> np.ndarray:
    """A uniform draw in [0, 1) for each (row, position) at `depth`, a function of `key` and those
    numbers only."""
    with np.errstate(over="ignore"):
        x = mix(np.uint64(key) + GOLDEN * np.uint64(depth + 1))
        x = mix(x ^ rows.astype(np.uint64) * GOLDEN)
        x = mix(x ^ positions.astype(np.uint64))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def merge_children(vocab: dict[str, int], merges: list) -> np.ndarray:
    """(V, 2) ids of the two tokens each merge joined (-1 -1: a token no merge made)."""
    children = np.full((max(vocab.values()) + 1, 2), -1, dtype=np.int64)
    for merge in merges:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        made = vocab.get(left + right)
        if made is not None and children[made, 0] < 0 and left in vocab and right in vocab:
            children[made] = vocab[left], vocab[right]
    return children


@dataclass(frozen=True)
class Sequences:
    """Token ids end to end (`ids`) and each row's length (`lengths`)."""

    ids: np.ndarray
    lengths: np.ndarray


class Resegmenter:
    """Another segmentation of rows of token ids, a function of each row's ids, its index in the
    split and a key (the run's seed, the epoch, the side) alone."""

    def __call__(self, seqs: Sequences, rows: np.ndarray, key: int) -> Sequences:
        """`seqs` re-segmented: rows[i] is row i's index in the split (its draws depend on it)."""
        raise NotImplementedError

    def capped(self, seqs: Sequences, rows: np.ndarray, key: int, cap: int) -> Sequences:
        """As __call__, but a row longer than `cap` after it keeps its deterministic ids (so no
        sampled row is longer than the split's longest: the model's positions and the batch budget
        hold)."""
        out = self(seqs, rows, key)
        keep = out.lengths <= cap
        if keep.all():
            return out
        new_owner = np.repeat(np.arange(len(keep)), out.lengths)  # each token's row
        old_owner = np.repeat(np.arange(len(keep)), seqs.lengths)
        mine, theirs = keep[new_owner], ~keep[old_owner]
        owner = np.concatenate([new_owner[mine], old_owner[theirs]])
        ids = np.concatenate([out.ids[mine], seqs.ids.astype(np.int64)[theirs]])[np.argsort(owner, kind="stable")]
        return Sequences(ids, np.where(keep, out.lengths, seqs.lengths))


class MergeDropout(Resegmenter):
    """Splits tokens back along a BPE merge table (`children`, merge_children's), each with
    probability p, from draws keyed by `key` (the run's seed, the epoch, the side)."""

    def __init__(self, children: np.ndarray, p: float) -> None:
        check("data.tokenizer.dropout", p, *PROBABILITY)
        self.children, self.p = children, p

    def __call__(self, seqs: Sequences, rows: np.ndarray, key: int) -> Sequences:
        """`seqs` re-segmented: rows[i] is row i's index in the split (its draws depend on it)."""
        ids, lengths = seqs.ids.astype(np.int64), seqs.lengths.astype(np.int64)
        owner = np.repeat(np.arange(len(lengths)), lengths)
        fresh = np.ones(len(ids), dtype=bool)  # tokens not drawn for yet
        depth = 0
        while self.p > 0:
            known = (ids >= 0) & (ids < len(self.children))
            left = np.where(known, self.children[np.where(known, ids, 0), 0], -1)
            candidates = fresh & (left >= 0)
            if not candidates.any():
                break
            starts = np.cumsum(lengths) - lengths
            positions = np.arange(len(ids)) - starts[owner]
            split = candidates & (uniforms(key, rows[owner], depth, positions) < self.p)
            ids, owner, fresh = self._split(ids, owner, split)
            lengths = np.bincount(owner, minlength=len(lengths))
            depth += 1
        return Sequences(ids, lengths)

    def _split(self, ids: np.ndarray, owner: np.ndarray, split: np.ndarray) -> tuple[np.ndarray, ...]:
        """Each token where `split` replaced by its two children (marked fresh), in place of it."""
        counts = 1 + split
        at = np.cumsum(counts) - counts  # where each token (or its left child) lands
        out = np.repeat(ids, counts)
        out[at[split]] = self.children[ids[split], 0]
        out[at[split] + 1] = self.children[ids[split], 1]
        fresh = np.zeros(len(out), dtype=bool)
        fresh[at[split]] = fresh[at[split] + 1] = True
        return out, np.repeat(owner, counts), fresh


def bpe_children(tokenizer) -> np.ndarray:
    """The merge table of a `tokenizers` BPE vocabulary (BpeTokenizer); any other is a ConfigError."""
    model = json.loads(tokenizer.model.to_str())["model"] if hasattr(tokenizer.model, "to_str") else {}
    if model.get("type") != "BPE":
        raise ConfigError("data.tokenizer.dropout (BPE-dropout) needs a BPE vocabulary of the tokenizers library "
                          f"(data.tokenizer.type=bpe) or a sentencepiece one; this run's is {type(tokenizer).__name__}")
    return merge_children(model["vocab"], model["merges"])


class PieceSampling(Resegmenter):
    """Sentencepiece's own subword sampling: each row decoded from its deterministic ids and encoded
    again with `enable_sampling` and alpha = p (Kudo 2018's sampling over the whole unigram lattice,
    where a smaller alpha is flatter; for a sentencepiece BPE model, BPE-dropout with probability p).
    Sentencepiece draws from a generator that each encode call's thread seeds from the global seed
    when it starts: seeding it from (key, row) before each row's call makes a row's segmentation a
    function of those alone, as MergeDropout's draws are. A row with <unk> (which decoding does not
    give back) keeps its ids; special ids at a row's end (the source's EOS) and control symbols at
    its start (a corpus's tag) stay."""

    def __init__(self, tokenizer, alpha: float) -> None:
        check("data.tokenizer.dropout", alpha, *PROBABILITY)
        self.model, self.alpha = tokenizer.model, alpha
        self.unk = tokenizer.special_ids["unk_id"]
        self.specials = {i for i in tokenizer.special_ids.values() if i is not None} - {self.unk}

    def __call__(self, seqs: Sequences, rows: np.ndarray, key: int) -> Sequences:
        if self.alpha == 0:
            return seqs
        with np.errstate(over="ignore"):
            seeds = mix(np.uint64(key) ^ rows.astype(np.uint64) * GOLDEN) >> np.uint64(33)  # 31-bit seeds
        out, lengths = [], []
        for ids, seed in zip(np.split(seqs.ids, np.cumsum(seqs.lengths)[:-1]), seeds):
            out.append(self.sample(ids.tolist(), int(seed)))
            lengths.append(len(out[-1]))
        return Sequences(np.asarray([i for row in out for i in row], dtype=np.int64), np.asarray(lengths, np.int64))

    def sample(self, ids: list[int], seed: int) -> list[int]:
        """One row's ids sampled anew by sentencepiece seeded with `seed` (its special ids at the end
        and its tags at the start kept; a row with <unk> unchanged)."""
        end = len(ids)
        while end and ids[end - 1] in self.specials:
            end -= 1
        start = 0
        while start < end and self.model.IsControl(ids[start]):  # a tag: decoding would drop it
            start += 1
        if end == start or self.unk in ids[start:end]:
            return ids
        spm.set_random_generator_seed(seed)
        text = self.model.decode(ids[start:end])
        return ids[:start] + self.model.encode([text], enable_sampling=True, alpha=self.alpha, nbest_size=-1,
                                               num_threads=1)[0] + ids[end:]


def resegmenter(tokenizer, p: float) -> Resegmenter:
    """BPE-dropout for a `tokenizers` BPE vocabulary, sentencepiece's sampling for a sentencepiece
    one (not a Marian vocabulary, whose piece list is not sentencepiece's)."""
    if isinstance(tokenizer, SentencePieceTokenizer):
        return PieceSampling(tokenizer, p)
    return MergeDropout(bpe_children(tokenizer), p)


class EpochDropout:
    """Subword regularization for the training split: each epoch's segmentation of rows, for the
    batch sampler (every row's size) and the dataset (a batch's ids). `caps`: the longest source and
    target of the split (deterministic), which no sampled row exceeds."""

    def __init__(self, src: Resegmenter, tgt: Resegmenter, seed: int, caps: tuple[int, int]) -> None:
        self.sides, self.seed, self.caps = (src, tgt), seed, caps

    @classmethod
    def for_table(cls, table, vocab, p: float, seed: int) -> "EpochDropout":
        """Subword regularization of the training split `table` (a datasets.Dataset of token ids)
        with the run's vocabularies: no sampled row longer than its longest."""
        lengths = table.with_format("numpy", columns=["src_len", "tgt_len"])[:]
        caps = tuple(int(lengths[k].max()) if len(table) else 0 for k in ("src_len", "tgt_len"))
        src = resegmenter(vocab.src, p)
        tgt = src if vocab.joint else resegmenter(vocab.tgt, p)
        return cls(src, tgt, seed, caps)

    def key(self, epoch: int, side: int) -> int:
        return ((self.seed & 0xFFFFFFFF) << 32) | ((epoch & 0x7FFFFFFF) << 1) | side

    def resegment(self, src: Sequences, tgt: Sequences, rows: np.ndarray, epoch: int) -> tuple[Sequences, Sequences]:
        """The rows' (index in the split: `rows`) source and target ids in `epoch`'s segmentation."""
        return tuple(dropout.capped(seqs, rows, self.key(epoch, side), cap)
                     for side, (dropout, seqs, cap) in enumerate(zip(self.sides, (src, tgt), self.caps)))

    def rows(self, rows: pa.Table, indices: np.ndarray, epoch: int) -> pa.Table:
        """A batch's `rows` (their indices in the split: `indices`) with their ids and lengths in
        `epoch`'s segmentation."""
        src, tgt = (Sequences(*flat_lists(rows.column(f"{name}_ids"))) for name in ("src", "tgt"))
        for name, seqs in zip(("src", "tgt"), self.resegment(src, tgt, indices, epoch)):
            offsets = pa.array(np.concatenate([[0], np.cumsum(seqs.lengths)]), type=pa.int32())
            values = pa.array(seqs.ids, type=rows.schema.field(f"{name}_ids").type.value_type)
            for column, array in ((f"{name}_ids", pa.ListArray.from_arrays(offsets, values)),
                                  (f"{name}_len", pa.array(seqs.lengths, type=rows.schema.field(f"{name}_len").type))):
                rows = rows.set_column(rows.schema.get_field_index(column), column, array)
        return rows

    def sizes(self, table, epoch: int, chunk: int = 100_000) -> np.ndarray:
        """Every row's padded cost in `epoch` (as TranslationDataset.sizes counts it), a chunk of
        rows at a time (memory bounded by the chunk, whatever the split's size)."""
        out = []
        for start in range(0, len(table), chunk):
            rows = table[start : start + chunk]
            src, tgt = (Sequences(*flat_lists(rows.column(name))) for name in ("src_ids", "tgt_ids"))
            src, tgt = self.resegment(src, tgt, np.arange(start, start + rows.num_rows), epoch)
            out.append(np.maximum(src.lengths, tgt.lengths + 1))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def dropout_note(tokenizer_type: str, p: float) -> str:
    """What the training log says of subword regularization when it is on (nothing when off)."""
    if p <= 0:
        return ""
    kind = "BPE-dropout" if tokenizer_type == "bpe" else "sentencepiece sampling"
    return f"; {kind} {p} (data.tokenizer.dropout): the training split is re-segmented every epoch"
