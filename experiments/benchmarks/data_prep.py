"""Data preparation of Multi30k: cold against warm (a cache hit), encoding throughput, and the
padding of token-budget batches against random ones.

    DATA_DIR=/path/to/data python experiments/benchmarks/data_prep.py [--num-proc 2]
"""

import os
import random
import tempfile
import time
from pathlib import Path

import harness

from transformer_mt.data.batching import TokenBudgetBatchSampler
from transformer_mt.data.corpus import TextFileCorpus
from transformer_mt.data.datamodule import TranslationDataModule
from transformer_mt.data.tokenizer import TokenizerOptions
from transformer_mt.markdown import markdown_table


def prepare(corpus, cache: Path, num_proc: int) -> tuple[float, TranslationDataModule]:
    start = time.perf_counter()  # the vocabularies are trained (or found) by prepare_data
    dm = TranslationDataModule({"multi30k": corpus}, TokenizerOptions(vocab_size=8000), cache_dir=str(cache),
                               num_proc=num_proc, max_tokens=4096)
    dm.prepare_data()
    dm.setup("fit")
    return time.perf_counter() - start, dm


def main() -> None:
    parser = harness.parser(__doc__, with_json=False)
    parser.add_argument("--data-dir", default=os.environ.get("DATA_DIR", "data"))
    parser.add_argument("--num-proc", type=int, default=2)
    args = parser.parse_args()
    corpus = TextFileCorpus(f"{args.data_dir}/multi30k", "en", "de",
                            {"train": "train", "val": "val", "test": "test2016"})
    train = corpus.load("train")
    print(f"Multi30k en-de: {len(train)} training pairs; {harness.described(harness.machine())}\n")
    with tempfile.TemporaryDirectory() as tmp:
        cold, _ = prepare(corpus, Path(tmp) / "a", num_proc=1)
        warm, dm = prepare(corpus, Path(tmp) / "a", num_proc=1)
        vocab = dm.vocabularies()
        print(markdown_table(["step", "seconds"], [
            ["prepare train + val, cold (BPE training + encoding + Arrow cache)", f"{cold:.2f}"],
            ["prepare train + val, warm (cache hit)", f"{warm:.2f}"], ["warm / cold", f"{warm / cold:.3f}"]],
            right=(1,)) + "\n")

        rows = []
        sentences = 2 * sum(len(corpus.load(split)) for split in ("train", "val", "test"))
        for num_proc in sorted({1, args.num_proc}):
            dm = TranslationDataModule({"multi30k": corpus}, TokenizerOptions(vocab_size=8000),
                                       cache_dir=str(Path(tmp) / f"b{num_proc}"), num_proc=num_proc, vocabularies=vocab)
            start = time.perf_counter()
            dm.prepare_data()
            seconds = time.perf_counter() - start
            rows.append([f"streamed, data.num_proc={num_proc}", f"{sentences / seconds:,.0f}"])
        print(markdown_table(["encoding (train + val + test, vocabularies given)", "sentences/s"], rows,
                             right=(1,)) + "\n")

    sizes = [max(len(s) + 1, len(t) + 1) for s, t in zip(vocab.src.encode(train.src),
                                                             vocab.tgt.encode(train.tgt))]
    budget = TokenBudgetBatchSampler(sizes, 4096, shuffle=True, seed=0)
    order = list(range(len(sizes)))
    random.Random(0).shuffle(order)
    per_batch = max(1, round(len(sizes) / len(budget)))  # same number of batches as the token budget
    fixed = [order[i : i + per_batch] for i in range(0, len(order), per_batch)]
    fixed_padding = 1 - sum(sizes) / sum(len(b) * max(sizes[i] for i in b) for b in fixed)
    print(markdown_table(["batching (4096 padded tokens)", "batches", "padding"], [
        ["token budget, length buckets", len(budget), f"{100 * budget.padding_fraction():.1f}%"],
        [f"{per_batch} random sentences per batch", len(fixed), f"{100 * fixed_padding:.1f}%"]], right=(1, 2)))


if __name__ == "__main__":
    main()
