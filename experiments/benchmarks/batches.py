"""The training batches (README.md): --what loader (batches/s of the collator), grid
(data.shape_grid against today's batcher), dropout (what subword regularization adds to an epoch)."""

import os
import resource
import tempfile
from pathlib import Path

import datasets
import harness
import numpy as np
import pyarrow as pa
import torch
from harness import BOS, EOS, PAD, sentences, synthetic_pairs
from torch.utils.data import DataLoader

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset
from transformer_mt.data.dropout import EpochDropout, resegmenter
from transformer_mt.data.tokenizer import TokenizerOptions, Vocabularies
from transformer_mt.data.vocabulary_training import train_sentencepiece
from transformer_mt.inference.members import load_translator
from transformer_mt.markdown import markdown_table

MAX_TOKENS = 25_000
PAIRS = {"loader": [300_000], "grid": [1_000_000], "dropout": [29_000, 4_500_000]}  # --pairs' defaults


def seconds_per_batch(dataset, collate, sizes, workers: int, count: int) -> float:
    sampler = TokenBudgetBatchSampler(sizes, MAX_TOKENS, shuffle=True, seed=0, pad_to_multiple=collate.pad_to_multiple)
    batches = iter(DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=workers))
    next(batches)
    return harness.timed(lambda: [next(batches) for _ in range(count)])[0] / count


def loader(args) -> dict:
    """Batches/s of the collator (and with data.pad_to_multiple=8) in the main process and in one worker."""
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        synthetic_pairs(args.pairs[0], 37_000, min_len=1, target=(0.0, 0.15)).save_to_disk(tmp)
        table = datasets.load_from_disk(tmp)  # memory-mapped
        dataset = TranslationDataset(table)
        sizes = dataset.sizes()
        sampler = TokenBudgetBatchSampler(sizes, MAX_TOKENS, shuffle=True, seed=0)
        src_len = table.with_format("numpy", columns=["src_len"])[:]["src_len"]
        print(f"{args.pairs[0]:,} pairs, median source length {np.median(src_len):.0f} (with EOS), {len(sampler)} "
              f"batches of {MAX_TOKENS:,} padded tokens ({args.pairs[0] / len(sampler):.0f} pairs on average), "
              f"{100 * sampler.padding_fraction():.1f}% padding; {harness.described(harness.machine())}\n")
        count = min(args.batches, len(sampler) - 1)
        loaders = {"vectorized (Arrow + numpy, one copy per tensor)": Collator(PAD, BOS, EOS),
                   "vectorized, data.pad_to_multiple=8": Collator(PAD, BOS, EOS, pad_to_multiple=8)}
        runs = {(name, workers): lambda c=collate, w=workers: seconds_per_batch(dataset, c, sizes, w, count)
                for workers in (0, 1) for name, collate in loaders.items()}
        rate = {key: 1 / seconds for key, seconds in harness.best(harness.rounds(runs, args.rounds, "loader")).items()}
    print(markdown_table(["collator", "main process (batches/s)", "one worker (batches/s)"],
                         [[name, f"{rate[name, 0]:.1f}", f"{rate[name, 1]:.1f}"] for name in loaders], right=(1, 2)))
    vectorized = next(iter(loaders))
    print(f"\ntarget > 50 batches/s from one worker: {'met' if rate[vectorized, 1] > 50 else 'NOT met'} "
          f"({rate[vectorized, 1]:.1f})")
    return {**harness.machine(), "pairs": args.pairs[0], "batches_per_s": [
        {"collator": name, "workers": workers, "batches_per_s": r} for (name, workers), r in rate.items()]}


def epoch(src: np.ndarray, tgt: np.ndarray, max_tokens: int, grid: int | None) -> dict:
    """One batcher's epoch 0: positions (filling rows included) and the src + tgt tensors', padding, shapes."""
    sizes = np.maximum(src, tgt)
    fitted, sampler = harness.timed(lambda: TokenBudgetBatchSampler(sizes, max_tokens, shuffle=True, seed=0,
                                                                    shape_grid=grid))
    batches = sampler.all_batches()
    positions = sum(sampler.padded_positions(b) for b in batches)
    if grid:
        shapes, tensor = {sampler.grid.shape(int(sizes[b].max())) for b in batches}, 2 * positions
    else:
        shapes = {(len(b), int(sizes[b].max())) for b in batches}
        tensor = sum(len(b) * (int(src[b].max()) + int(tgt[b].max())) for b in batches)
    return {"grid": grid, "positions": positions, "padding": 1 - int(sizes.sum()) / positions,
            "tensor_positions": tensor, "batches": len(batches), "shapes": len(shapes),
            "fit_s": fitted if grid else None}


def grid(args) -> dict:
    corpora = {}
    if args.lengths:
        given = np.loadtxt(args.lengths, dtype=np.int64, ndmin=2)
        corpora["given"] = (given[:, 0], given[:, 1], args.budget)
    if args.multi30k:
        vocabularies = load_translator([harness.SHIPPED], None).tokenizer
        src, tgt = (Path(args.multi30k, f"train.{lang}").read_text(encoding="utf-8").splitlines()
                    for lang in ("en", "de"))
        corpora["Multi30k"] = (np.array([len(ids) for ids in vocabularies.encode_sources(src)]),
                               np.array([len(ids) + 1 for ids in vocabularies.tgt.encode(tgt)]), 4096)
    wmt = synthetic_pairs(args.pairs[0], 1000).with_format("numpy", columns=["src_len", "tgt_len"])[:]
    corpora["WMT-like"] = (wmt["src_len"].astype(np.int64), wmt["tgt_len"].astype(np.int64) + 1, MAX_TOKENS)
    results = {}
    for name, (src, tgt, budget) in corpora.items():
        rows = results[name] = [epoch(src, tgt, budget, k) for k in [None, *args.grids]]
        print(markdown_table(
            ["corpus", "batcher", "padding", "positions / today's", "src + tgt tensors / today's", "batches",
             "shapes", "fit s"],
            [[name, f"shape_grid={r['grid']}" if r["grid"] else "today's", f"{100 * r['padding']:.1f}%",
              f"{r['positions'] / rows[0]['positions']:.3f}x",
              f"{r['tensor_positions'] / rows[0]['tensor_positions']:.3f}x", r["batches"], r["shapes"],
              f"{r['fit_s']:.2f}" if r["fit_s"] is not None else "-"] for r in rows]) + "\n")
    return results


def dropout_costs(epochs, table: pa.Table) -> dict:
    """The sizes pass of an epoch, and the re-segmentation of a batch of 128 (rows already read)."""
    sizes_s, sizes = harness.timed(lambda: epochs.sizes(table, epoch=1))
    rng = np.random.default_rng(0)
    batches = [np.sort(rng.choice(table.num_rows, 128, replace=False)) for _ in range(200)]
    taken = [table.take(pa.array(rows)) for rows in batches]  # reading the rows costs the same without dropout
    batch_s, _ = harness.timed(lambda: [epochs.rows(read, rows, epoch=1) for rows, read in zip(batches, taken)])
    return {"pairs": table.num_rows, "sizes_s": sizes_s, "sizes_us_per_pair": sizes_s / table.num_rows * 1e6,
            "batch_ms": batch_s / len(batches) * 1e3, "mean_size": float(sizes.mean()),
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def dropout(args) -> dict:
    """Per --pairs size, what data.tokenizer.dropout costs (`dropout_costs`), a row as it comes."""
    folder = Path(os.environ.get("DATA_DIR", harness.ROOT / "data")) / "multi30k"
    src, tgt = ([(folder / f"train.{lang}").read_text().splitlines() for lang in ("en", "de")]
                if (folder / "train.en").is_file() else [sentences(29_000, 6, 20)] * 2)
    vocab = (load_translator([harness.SHIPPED], None).tokenizer if args.tokenizer == "bpe" else
             Vocabularies(train_sentencepiece(src + tgt, TokenizerOptions(type="sentencepiece", vocab_size=10_000))))
    print(f"{args.tokenizer}, p={args.p}, {len(src)} distinct pairs, one thread; "
          f"{harness.described(harness.machine())}\n")
    columns = ["pairs", "sizes pass per epoch (s)", "per pair (us)", "a batch of 128 (ms)", "mean size",
               "peak RSS (GB)"]
    print(markdown_table(columns, [], right=range(6)))  # then a row per size as it comes
    src_ids, tgt_ids, rows = vocab.encode_sources(src), vocab.tgt.encode(tgt), []
    base = pa.table({"src_ids": pa.array(src_ids, type=pa.list_(pa.int32())),  # src_ids end in EOS
                     "tgt_ids": pa.array(tgt_ids, type=pa.list_(pa.int32())),
                     "src_len": pa.array([len(s) for s in src_ids], type=pa.int32()),
                     "tgt_len": pa.array([len(t) for t in tgt_ids], type=pa.int32())})
    caps = (max(map(len, src_ids)), max(map(len, tgt_ids)))
    for pairs in args.pairs:
        table = pa.concat_tables([base] * -(-pairs // base.num_rows)).slice(0, pairs)  # chunks sharing one buffer
        src_side = resegmenter(vocab.src, args.p)
        r = dropout_costs(EpochDropout(src_side, src_side if vocab.joint else resegmenter(vocab.tgt, args.p), 1,
                                       caps), table)
        rows.append(r)
        cells = [f"{pairs:,}", f"{r['sizes_s']:.2f}", f"{r['sizes_us_per_pair']:.2f}", f"{r['batch_ms']:.2f}",
                 f"{r['mean_size']:.1f}", f"{r['peak_rss_gb']:.2f}"]
        print(markdown_table(columns, [cells]).splitlines()[-1], flush=True)
    return {**harness.machine(), "tokenizer": args.tokenizer, "p": args.p, "sizes": rows}


def main() -> None:
    parser = harness.parser(__doc__)
    add = parser.add_argument
    add("--what", choices=list(PAIRS), required=True)
    add("--pairs", type=int, nargs="+", help="pairs: loader 300,000; grid 1,000,000; dropout 29,000 4,500,000")
    add("--batches", type=int, default=150, help="loader: timed batches per round")
    add("--rounds", type=int, default=2, help="loader: rounds (the best counts)")
    add("--multi30k", help="grid: the Multi30k folder (train.en, train.de)")
    add("--grids", type=int, nargs="+", default=[8, 16, 32], help="grid: the K of each data.shape_grid")
    add("--lengths", type=Path, help="grid: a corpus of these lengths, a pair a line")
    add("--budget", type=int, default=MAX_TOKENS, help="grid: --lengths' tokens a batch")
    add("--p", type=float, default=0.1, help="dropout: the probability (sentencepiece: alpha)")
    add("--tokenizer", choices=["bpe", "sentencepiece"], default="bpe", help="dropout")
    args = parser.parse_args()
    args.pairs = args.pairs or PAIRS[args.what]
    harness.save({"loader": loader, "grid": grid, "dropout": dropout}[args.what](args), args.json)


if __name__ == "__main__":
    main()
