"""Training loader speed: batches of 25,000 padded tokens per second, the vectorized collator
against the per-sentence Python one it replaced, in the main process and in one worker.

    python experiments/benchmarks/loader_speed.py [--pairs 300000] [--batches 150] [--rounds 2] [--json PATH]

WMT-like pairs (synthetic.py; targets about as long as their sources, a 37k vocabulary) in Arrow
files of the datamodule's schema, memory-mapped, read by a DataLoader with the token-budget sampler;
the peer is a copy of the former code. The loaders take turns each round (harness.py); the best round
counts, worker start-up not timed. Target: more than 50 batches/s from one worker.
"""

import json
import tempfile
from pathlib import Path

import datasets
import harness
import numpy as np
import torch
from synthetic import EOS, synthetic_pairs
from torch.utils.data import DataLoader

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset
from transformer_mt.markdown import markdown_table

VOCAB, MAX_TOKENS = 37000, 25000


def write_corpus(path: Path, pairs: int) -> datasets.Dataset:
    """`pairs` synthetic training pairs (targets about as long as their sources) in Arrow files of the
    datamodule's schema, memory-mapped."""
    synthetic_pairs(pairs, VOCAB, min_len=1, target=(0.0, 0.15)).save_to_disk(str(path))
    return datasets.load_from_disk(str(path))


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


def seconds_per_batch(dataset, collate, sizes, workers: int, count: int) -> float:
    """Seconds a batch over `count` batches, timed from the first one (worker start-up excluded)."""
    multiple = collate.pad_to_multiple if isinstance(collate, Collator) else 1
    sampler = TokenBudgetBatchSampler(sizes, MAX_TOKENS, shuffle=True, seed=0, pad_to_multiple=multiple)
    batches = iter(DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=workers))
    next(batches)
    seconds, _ = harness.timed(lambda: [next(batches) for _ in range(count)])
    return seconds / count


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--pairs", type=int, default=300_000)
    parser.add_argument("--batches", type=int, default=150, help="timed batches per round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        table = write_corpus(Path(tmp) / "ids", args.pairs)
        new, old = TranslationDataset(table), PythonDataset(table)
        sizes = new.sizes()
        sampler = TokenBudgetBatchSampler(sizes, MAX_TOKENS, shuffle=True, seed=0)
        first = next(iter(sampler))
        src_len = table.with_format("numpy", columns=["src_len"])[:]["src_len"]
        print(f"{args.pairs:,} pairs, median source length {np.median(src_len):.0f} (with EOS), {len(sampler)} "
              f"batches of {MAX_TOKENS:,} padded tokens ({args.pairs / len(sampler):.0f} pairs on average), "
              f"{100 * sampler.padding_fraction():.1f}% padding; {harness.described(harness.machine())}\n")
        # the same batches from both (equal tensors), before any timing
        a, b = Collator(0, 1, EOS)(new.__getitems__(first)), PythonCollator(0, 1, EOS)(old.__getitems__(first))
        assert all(torch.equal(a[k], b[k]) if torch.is_tensor(b[k]) else a[k] == b[k] for k in b)
        count = min(args.batches, len(sampler) - 1)
        loaders = {"previous (Python lists, per-sentence copies)": (old, PythonCollator(0, 1, EOS)),
                   "vectorized (Arrow + numpy, one copy per tensor)": (new, Collator(0, 1, EOS)),
                   "vectorized, data.pad_to_multiple=8": (new, Collator(0, 1, EOS, pad_to_multiple=8))}
        runs = {(name, workers): lambda d=dataset, c=collate, w=workers: seconds_per_batch(d, c, sizes, w, count)
                for workers in (0, 1) for name, (dataset, collate) in loaders.items()}
        rate = {key: 1 / seconds for key, seconds in harness.best(harness.rounds(runs, args.rounds, "loader")).items()}
    print(markdown_table(["collator", "main process (batches/s)", "one worker (batches/s)"],
                         [[name, f"{rate[name, 0]:.1f}", f"{rate[name, 1]:.1f}"] for name in loaders], right=(1, 2)))
    previous, vectorized = list(loaders)[:2]
    for workers, where in ((0, "main process"), (1, "one worker")):
        print(f"\nvectorized / previous, {where}: {rate[vectorized, workers] / rate[previous, workers]:.1f}x")
    print(f"target > 50 batches/s from one worker: {'met' if rate[vectorized, 1] > 50 else 'NOT met'} "
          f"({rate[vectorized, 1]:.1f})")
    if args.json:
        args.json.write_text(json.dumps({**harness.machine(), "pairs": args.pairs, "batches_per_s": [
            {"collator": name, "workers": workers, "batches_per_s": r} for (name, workers), r in rate.items()]}) + "\n")


if __name__ == "__main__":
    main()
