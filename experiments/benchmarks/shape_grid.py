"""data.shape_grid against today's batcher: padded positions and distinct batch shapes of an epoch.

    python experiments/benchmarks/shape_grid.py [--ckpt experiments/multi30k/multi30k_en_de.ckpt]
        [--multi30k $DATA_DIR/multi30k] [--pairs 1000000] [--grids 8 16 32] [--lengths FILE --budget N] [--json PATH]

Corpora: Multi30k's training split in the checkpoint's vocabulary (--multi30k) in 4,096-token
batches, --pairs WMT-like pairs (synthetic.py) in 25,000-token ones, and --lengths FILE's pairs (a
line: source length with EOS, target length with BOS) in --budget-token ones. Per batcher, epoch 0
(seed 0, shuffled): padded positions (filling rows included), padding, positions and src + tgt
tensor positions against today's, batches, distinct shapes, the grid's fitting seconds.
"""

import json
import time
from pathlib import Path

import harness
import numpy as np
import torch
from synthetic import synthetic_pairs

from transformer_mt.data.batching import TokenBudgetBatchSampler
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.markdown import markdown_table


def multi30k_lengths(ckpt: str, folder: str) -> tuple[np.ndarray, np.ndarray]:
    """Each Multi30k training pair's source (with EOS) and target (with BOS) lengths."""
    vocabularies = Vocabularies.from_dict(torch.load(ckpt, map_location="cpu", weights_only=False)
                                          ["hyper_parameters"]["tokenizer"])
    src = Path(folder, "train.en").read_text(encoding="utf-8").splitlines()
    tgt = Path(folder, "train.de").read_text(encoding="utf-8").splitlines()
    src_len = np.array([len(ids) for ids in vocabularies.encode_sources(src)])
    tgt_len = np.array([len(ids) for ids in vocabularies.tgt.encode(tgt)])
    return src_len, tgt_len + 1


def synthetic_lengths(pairs: int) -> tuple[np.ndarray, np.ndarray]:
    table = synthetic_pairs(pairs, 1000).with_format("numpy", columns=["src_len", "tgt_len"])[:]
    return table["src_len"].astype(np.int64), table["tgt_len"].astype(np.int64) + 1


def measured(src: np.ndarray, tgt: np.ndarray, max_tokens: int, grid: int | None) -> dict:
    """One batcher's epoch 0: positions, padding, batches, shapes (and the grid's fitting time);
    `tensor` the source + target tensors' positions as the Collator pads them (each side to its
    longest, or both to the shape's length)."""
    sizes = np.maximum(src, tgt)
    start = time.perf_counter()
    sampler = TokenBudgetBatchSampler(sizes, max_tokens, shuffle=True, seed=0, shape_grid=grid)
    fitted = time.perf_counter() - start
    batches = sampler.all_batches()
    positions = sum(sampler.padded_positions(b) for b in batches)
    if grid:
        shapes = {sampler.grid.shape(int(sizes[b].max())) for b in batches}
        tensor = 2 * positions
    else:
        shapes = {(len(b), int(sizes[b].max())) for b in batches}
        tensor = sum(len(b) * (int(src[b].max()) + int(tgt[b].max())) for b in batches)
    return {"grid": grid, "positions": positions, "padding": 1 - int(sizes.sum()) / positions,
            "tensor_positions": tensor, "batches": len(batches), "shapes": len(shapes),
            "fit_s": fitted if grid else None}


def table(corpus: str, rows: list[dict]) -> str:
    today, tensor = rows[0]["positions"], rows[0]["tensor_positions"]
    return markdown_table(
        ["corpus", "batcher", "padding", "positions / today's", "src + tgt tensors / today's", "batches", "shapes",
         "fit s"],
        [[corpus, f"shape_grid={r['grid']}" if r["grid"] else "today's", f"{100 * r['padding']:.1f}%",
          f"{r['positions'] / today:.3f}x", f"{r['tensor_positions'] / tensor:.3f}x", r["batches"], r["shapes"],
          f"{r['fit_s']:.2f}" if r["fit_s"] is not None else "-"] for r in rows])


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--ckpt", default="experiments/multi30k/multi30k_en_de.ckpt")
    parser.add_argument("--multi30k", default=None, help="the Multi30k folder (train.en, train.de)")
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--grids", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--lengths", type=Path, help="a corpus of these lengths, a pair a line")
    parser.add_argument("--budget", type=int, default=25000, help="--lengths' tokens a batch")
    args = parser.parse_args()
    corpora = {}
    if args.lengths:
        given = np.loadtxt(args.lengths, dtype=np.int64, ndmin=2)
        corpora["given"] = (given[:, 0], given[:, 1], args.budget)
    if args.multi30k:
        corpora["Multi30k"] = (*multi30k_lengths(args.ckpt, args.multi30k), 4096)
    corpora["WMT-like"] = (*synthetic_lengths(args.pairs), 25000)
    results = {}
    for name, (src, tgt, budget) in corpora.items():
        results[name] = [measured(src, tgt, budget, grid) for grid in [None, *args.grids]]
        print(table(name, results[name]) + "\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
