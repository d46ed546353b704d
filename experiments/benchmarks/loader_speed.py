"""Training loader speed: batches of 25,000 padded tokens per second, the vectorized collator
against the per-sentence Python one it replaced, in the main process and in one worker.

    python experiments/benchmarks/loader_speed.py [--pairs 300000] [--batches 150]

A synthetic corpus of WMT-like lengths (lognormal, median 25 tokens, at most 250; targets about as
long as their sources) over a 37k vocabulary is written to an Arrow file of the schema the
datamodule writes, memory-mapped back, and read through a DataLoader with the token-budget sampler
(data.max_tokens=25000, shuffled) as training does. The peer is a copy of the former code: Arrow
rows turned into Python lists, then a tensor and a slice copy per sentence. Each loader runs
`--rounds` times (the order interleaved); the best round counts. Worker start-up is not timed.
Target: more than 50 batches/s from one worker (a `model=base` step at 25k target tokens on a GPU).
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import torch
from datasets.arrow_writer import ArrowWriter
from torch.utils.data import DataLoader

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset
from transformer_mt.data.encoding import TRAIN_FEATURES
from transformer_mt.markdown import markdown_table

VOCAB, EOS, MAX_TOKENS = 37000, 2, 25000


def lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    """Lognormal sentence lengths, median 25, between 1 and 250."""
    return np.clip(np.rint(rng.lognormal(np.log(25), 0.6, n)), 1, 250).astype(np.int64)


def id_lists(rng: np.random.Generator, count: np.ndarray, eos: bool) -> pa.ListArray:
    """Lists of `count` random token ids (the last one EOS with `eos`)."""
    offsets = np.concatenate([[0], np.cumsum(count)]).astype(np.int32)
    values = rng.integers(4, VOCAB, int(offsets[-1]), dtype=np.int32)
    if eos:
        values[offsets[1:] - 1] = EOS
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))


def write_corpus(path: Path, pairs: int, seed: int = 0) -> datasets.Dataset:
    """`pairs` synthetic training pairs in an Arrow file of the datamodule's schema, memory-mapped."""
    rng = np.random.default_rng(seed)
    src_len = lengths(rng, pairs)  # with EOS
    tgt_len = np.clip(np.rint(src_len * rng.lognormal(0, 0.15, pairs)), 1, 249).astype(np.int64)  # + EOS <= 250
    table = pa.table({"src_ids": id_lists(rng, src_len, eos=True), "tgt_ids": id_lists(rng, tgt_len, eos=False),
                      "src_len": src_len.astype(np.int32), "tgt_len": tgt_len.astype(np.int32)})
    with ArrowWriter(features=TRAIN_FEATURES, path=str(path)) as writer:
        for batch in table.to_batches(max_chunksize=100_000):
            writer.write_table(pa.Table.from_batches([batch]))
        writer.finalize()
    return datasets.Dataset.from_file(str(path))


class PythonDataset(TranslationDataset):
    """The former dataset: a batch's Arrow rows as Python lists of dicts."""

    def __getitems__(self, indices: list[int]) -> list[dict]:
        rows = self.table[list(indices)]
        return [{"id": i, "src": s, "tgt": t} for i, s, t in zip(indices, rows["src_ids"], rows["tgt_ids"])]


class PythonCollator:
    """The former collator: a tensor and a slice copy per sentence (no text columns here)."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int) -> None:
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id

    def pad(self, seqs: list[list[int]]) -> torch.Tensor:
        out = torch.full((len(seqs), max(len(s) for s in seqs)), self.pad_id, dtype=torch.long)
        for i, s in enumerate(seqs):
            out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        return out

    def __call__(self, examples: list[dict]) -> dict:
        return {
            "id": torch.tensor([e["id"] for e in examples], dtype=torch.long),
            "src": self.pad([e["src"] for e in examples]),
            "tgt_in": self.pad([[self.bos_id, *e["tgt"]] for e in examples]),
            "tgt_out": self.pad([[*e["tgt"], self.eos_id] for e in examples]),
            "num_tokens": sum(len(e["src"]) + len(e["tgt"]) + 1 for e in examples),
            "num_src_tokens": sum(len(e["src"]) for e in examples),
        }


def batches_per_second(dataset, collate, sampler: TokenBudgetBatchSampler, workers: int, count: int) -> float:
    """Batches per second over `count` batches, timed from the first one (worker start-up excluded)."""
    loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=workers, pin_memory=False)
    it = iter(loader)
    next(it)
    start = time.perf_counter()
    for _ in range(count):
        next(it)
    seconds = time.perf_counter() - start
    del it
    return count / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=300_000)
    parser.add_argument("--batches", type=int, default=150, help="timed batches per round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        table = write_corpus(Path(tmp) / "ids.arrow", args.pairs)
        new, old = TranslationDataset(table), PythonDataset(table)
        sizes = new.sizes()
        sampler = TokenBudgetBatchSampler(sizes, MAX_TOKENS, shuffle=True, seed=0)
        first = next(iter(sampler))
        src_len = table.with_format("numpy", columns=["src_len"])[:]["src_len"]
        print(f"{args.pairs:,} pairs, median source length {np.median(src_len):.0f} (with EOS), {len(sampler)} "
              f"batches of {MAX_TOKENS:,} padded tokens ({args.pairs / len(sampler):.0f} pairs on average), "
              f"{100 * sampler.padding_fraction():.1f}% padding; torch {torch.__version__}, {os.cpu_count()} CPUs\n")
        # the same batches from both (equal tensors), before any timing
        a, b = Collator(0, 1, EOS)(new.__getitems__(first)), PythonCollator(0, 1, EOS)(old.__getitems__(first))
        assert all(torch.equal(a[k], b[k]) if torch.is_tensor(b[k]) else a[k] == b[k] for k in b)
        count = min(args.batches, len(sampler) - 1)
        loaders = {"previous (Python lists, per-sentence copies)": (old, PythonCollator(0, 1, EOS)),
                   "vectorized (Arrow + numpy, one copy per tensor)": (new, Collator(0, 1, EOS)),
                   "vectorized, data.pad_to_multiple=8": (new, Collator(0, 1, EOS, pad_to_multiple=8))}
        best: dict[tuple[str, int], float] = {}
        for _ in range(args.rounds):
            for workers in (0, 1):
                for name, (dataset, collate) in loaders.items():
                    multiple = collate.pad_to_multiple if isinstance(collate, Collator) else 1
                    sampler = TokenBudgetBatchSampler(sizes, MAX_TOKENS, shuffle=True, seed=0,
                                                      pad_to_multiple=multiple)
                    speed = batches_per_second(dataset, collate, sampler, workers, count)
                    best[name, workers] = max(best.get((name, workers), 0.0), speed)
        print(markdown_table(["collator", "main process (batches/s)", "one worker (batches/s)"],
                             [[name, f"{best[name, 0]:.1f}", f"{best[name, 1]:.1f}"] for name in loaders],
                             right=(1, 2)))
        previous, vectorized = list(loaders)[:2]
        for workers, where in ((0, "main process"), (1, "one worker")):
            print(f"\nvectorized / previous, {where}: {best[vectorized, workers] / best[previous, workers]:.1f}x")
        verdict = "met" if best[vectorized, 1] > 50 else "NOT met"
        print(f"target > 50 batches/s from one worker: {verdict} ({best[vectorized, 1]:.1f})")


if __name__ == "__main__":
    main()
