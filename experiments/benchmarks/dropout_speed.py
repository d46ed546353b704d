"""What subword regularization (data.tokenizer.dropout) adds to an epoch, at Multi30k size and at
WMT14 size.

    DATA_DIR=../shared/data python experiments/benchmarks/dropout_speed.py [--pairs 29000 4500000] [--p 0.1]
        [--tokenizer bpe|sentencepiece]

The shipped model's BPE (or a 10k unigram sentencepiece vocabulary, alpha --p) on Multi30k's
training sentences (made-up ones without $DATA_DIR), repeated to each size: the once-an-epoch pass
of every pair's size (EpochDropout.sizes), a batch of 128 re-segmented (EpochDropout.rows), peak RSS.
"""

import os
import resource
import sys
import time
from pathlib import Path

import harness
import numpy as np
import pyarrow as pa
from synthetic import sentences

from transformer_mt.data.dropout import EpochDropout, resegmenter
from transformer_mt.data.tokenizer import TokenizerOptions, Vocabularies
from transformer_mt.data.vocabulary_training import train_sentencepiece
from transformer_mt.inference.members import load_translator
from transformer_mt.markdown import markdown_table


def corpus() -> tuple[list[str], list[str]]:
    folder = Path(os.environ.get("DATA_DIR", harness.ROOT / "data")) / "multi30k"
    if (folder / "train.en").is_file():
        return ((folder / "train.en").read_text().splitlines(), (folder / "train.de").read_text().splitlines())
    return sentences(29_000, 6, 20), sentences(29_000, 6, 20)


def arrow_table(vocab, src: list[str], tgt: list[str], pairs: int) -> pa.Table:
    """`pairs` rows of src_ids (EOS last), tgt_ids and their lengths, the corpus repeated."""
    src_ids, tgt_ids = vocab.encode_sources(src), vocab.tgt.encode(tgt)
    columns = {"src_ids": pa.array(src_ids, type=pa.list_(pa.int32())),
               "tgt_ids": pa.array(tgt_ids, type=pa.list_(pa.int32()))}
    columns["src_len"] = pa.array([len(s) for s in src_ids], type=pa.int32())
    columns["tgt_len"] = pa.array([len(t) for t in tgt_ids], type=pa.int32())
    base = pa.table(columns)
    return pa.concat_tables([base] * -(-pairs // base.num_rows)).slice(0, pairs)  # chunks sharing one buffer


def measure(dropout: EpochDropout, table: pa.Table) -> dict[str, float]:
    start = time.perf_counter()
    sizes = dropout.sizes(table, epoch=1)
    sizes_s = time.perf_counter() - start
    rng = np.random.default_rng(0)
    batches = [np.sort(rng.choice(table.num_rows, 128, replace=False)) for _ in range(200)]
    taken = [table.take(pa.array(rows)) for rows in batches]  # reading the rows costs the same without dropout
    start = time.perf_counter()
    for rows, read in zip(batches, taken):
        dropout.rows(read, rows, epoch=1)
    batch_ms = (time.perf_counter() - start) / len(batches) * 1e3
    return {"pairs": table.num_rows, "sizes_s": sizes_s, "sizes_us_per_pair": sizes_s / table.num_rows * 1e6,
            "batch_ms": batch_ms, "mean_size": float(sizes.mean()),
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def main() -> None:
    parser = harness.parser(__doc__, with_json=False)
    parser.add_argument("--pairs", type=int, nargs="+", default=[29_000, 4_500_000])
    parser.add_argument("--p", type=float, default=0.1)
    parser.add_argument("--tokenizer", choices=["bpe", "sentencepiece"], default="bpe")
    args = parser.parse_args()
    src, tgt = corpus()
    if args.tokenizer == "bpe":
        vocab = load_translator([harness.ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"], None).tokenizer
    else:
        options = TokenizerOptions(type="sentencepiece", vocab_size=10_000)
        vocab = Vocabularies(train_sentencepiece(src + tgt, options))
    print(f"{args.tokenizer}, p={args.p}, {len(src)} distinct pairs, one thread; "
          f"{harness.described(harness.machine())}\n")
    columns = ["pairs", "sizes pass per epoch (s)", "per pair (us)", "a batch of 128 (ms)", "mean size",
               "peak RSS (GB)"]
    print(markdown_table(columns, [], right=range(6)))  # then a row per size as it comes
    for pairs in args.pairs:
        table = arrow_table(vocab, src, tgt, pairs)
        caps = (int(pa.compute.max(table["src_len"]).as_py()), int(pa.compute.max(table["tgt_len"]).as_py()))
        src_side = resegmenter(vocab.src, args.p)
        tgt_side = src_side if vocab.joint else resegmenter(vocab.tgt, args.p)
        r = measure(EpochDropout(src_side, tgt_side, 1, caps), table)
        cells = [f"{r['pairs']:,}", f"{r['sizes_s']:.2f}", f"{r['sizes_us_per_pair']:.2f}", f"{r['batch_ms']:.2f}",
                 f"{r['mean_size']:.1f}", f"{r['peak_rss_gb']:.2f}"]
        print(markdown_table(columns, [cells]).splitlines()[-1], flush=True)
        print(f"[dropout_speed] {pairs} done", file=sys.stderr)


if __name__ == "__main__":
    main()
