"""Token-budget batching: length buckets, a padded-token budget, per-epoch shuffling, DDP shards."""

from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import Dataset, Sampler

from transformer_mt.errors import DataError


class TranslationDataset(Dataset):
    """Encoded pairs: source ids (ending in EOS), target ids (no specials), and the raw text."""

    def __init__(self, src_ids: list[list[int]], tgt_ids: list[list[int]], src_text: list[str], tgt_text: list[str]):
        self.src_ids, self.tgt_ids, self.src_text, self.tgt_text = src_ids, tgt_ids, src_text, tgt_text

    def __len__(self) -> int:
        return len(self.src_ids)

    def __getitem__(self, i: int) -> dict:
        return {"id": i, "src": self.src_ids[i], "tgt": self.tgt_ids[i], "src_text": self.src_text[i],
                "tgt_text": self.tgt_text[i]}

    def sizes(self) -> list[int]:
        """Padded cost of each example: the longer of the source and the target + 1 (BOS / EOS)."""
        return [max(len(s), len(t) + 1) for s, t in zip(self.src_ids, self.tgt_ids)]


class Collator:
    """Pads a list of examples into src (B, S), tgt_in = BOS + y (B, T), tgt_out = y + EOS (B, T)."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int) -> None:
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id

    def _pad(self, seqs: list[list[int]]) -> torch.Tensor:
        out = torch.full((len(seqs), max(len(s) for s in seqs)), self.pad_id, dtype=torch.long)
        for i, s in enumerate(seqs):
            out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        return out

    def __call__(self, examples: list[dict]) -> dict:
        return {
            "id": torch.tensor([e["id"] for e in examples], dtype=torch.long),
            "src": self._pad([e["src"] for e in examples]),
            "tgt_in": self._pad([[self.bos_id, *e["tgt"]] for e in examples]),
            "tgt_out": self._pad([[*e["tgt"], self.eos_id] for e in examples]),
            "src_text": [e["src_text"] for e in examples],
            "tgt_text": [e["tgt_text"] for e in examples],
        }


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Batches of similar-length examples whose padded size (count x longest) fits `max_tokens`.

    Examples are sorted by length (ties broken at random per epoch when shuffling), cut into
    batches greedily, and the batch order is shuffled from (seed, epoch). Batches, not examples,
    are sharded across `num_replicas` ranks; with `even=True` (training) the list is padded by
    repeating batches so every rank runs the same number of steps, with `even=False` (evaluation)
    every example is seen exactly once.
    """

    def __init__(self, sizes: Sequence[int], max_tokens: int, shuffle: bool, seed: int = 0,
                 num_replicas: int = 1, rank: int = 0, even: bool = True) -> None:
        too_long = [i for i, n in enumerate(sizes) if n > max_tokens]
        if too_long:
            raise DataError(
                f"example {too_long[0]} has {sizes[too_long[0]]} tokens, more than the batch budget "
                f"{max_tokens} (data.max_tokens / data.eval_max_tokens)"
            )
        self.sizes, self.max_tokens, self.shuffle, self.seed = list(sizes), max_tokens, shuffle, seed
        self.num_replicas, self.rank, self.even = num_replicas, rank, even
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def all_batches(self) -> list[list[int]]:
        """The batches of this epoch across all ranks, in the order they are dealt out."""
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        order = torch.randperm(len(self.sizes), generator=g).tolist() if self.shuffle else range(len(self.sizes))
        order = sorted(order, key=self.sizes.__getitem__)
        batches, batch, longest = [], [], 0
        for i in order:
            n = max(longest, self.sizes[i])
            if batch and n * (len(batch) + 1) > self.max_tokens:
                batches.append(batch)
                batch, n = [], self.sizes[i]
            batch.append(i)
            longest = n
        if batch:
            batches.append(batch)
        if self.shuffle:
            batches = [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]
        if not self.even:  # every rank needs a batch: DDP ranks meet at the end of evaluation
            while len(batches) < self.num_replicas and max(map(len, batches), default=0) > 1:
                largest = max(range(len(batches)), key=lambda i: len(batches[i]))
                big = batches.pop(largest)
                batches[largest:largest] = [big[: len(big) // 2], big[len(big) // 2 :]]
            if len(batches) < self.num_replicas:
                raise DataError(f"{len(self.sizes)} sentences cannot be shared by {self.num_replicas} processes")
        if self.even and batches:
            for k in range(-len(batches) % self.num_replicas):
                batches.append(batches[k % len(batches)])
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.all_batches()[self.rank :: self.num_replicas]

    def __len__(self) -> int:
        return len(self.all_batches()[self.rank :: self.num_replicas])

    def padding_fraction(self) -> float:
        """Share of padded positions in this epoch's batches (of count x longest)."""
        total = sum(len(b) * max(self.sizes[i] for i in b) for b in self.all_batches())
        return 1 - sum(self.sizes) / total if total else 0.0
