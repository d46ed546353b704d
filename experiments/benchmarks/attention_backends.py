"""The SDPA backends on a bounded set of batch shapes (issue 67): with data.shape_grid, cuDNN's
attention builds its execution plan once per shape, so it may pay where token-budget batches of
ever new shapes made it lose (518 ms a step against 68 ms on an H200).

    python experiments/benchmarks/attention_backends.py [--device cuda|cpu] [--tokens 25000]
        [--grid 16] [--reps 5] [--heads 8] [--d-k 64] [--dtype bf16|fp32] [--smoke] [--json PATH]

The batches: one of each shape of the grid fitted to synthetic.py's sentence lengths (as
loop_speed.py trains on them), collated as the datamodule does. For each kind of attention
(encoder self-attention and cross-attention with the source's padding mask, decoder
self-attention causal) and each backend (flash, efficient, cudnn, math) forced alone
(`torch.nn.attention.sdpa_kernel`): the first pass over every shape (forward + backward: where
a backend builds its plans) and then the median of --reps rounds over the shapes, in ms per batch;
"cannot run" with torch's reason where the backend refuses the call (flash takes no mask). The
default is what the model runs now (attention.CUDA_BACKENDS on a GPU). --smoke: 2,000-token
batches, a grid of 3, fp32.
"""

import argparse
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from output import emit, machine
from synthetic import BOS, EOS, PAD, synthetic_pairs
from torch.nn.attention import SDPBackend, sdpa_kernel

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset
from transformer_mt.markdown import markdown_table

KINDS = ("encoder_self", "decoder_self", "cross")
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}


def grid_batches(tokens: int, grid: int) -> list[dict]:
    """One collated batch of each shape of the grid fitted to synthetic lengths (the fullest one)."""
    dataset = TranslationDataset(synthetic_pairs(max(20_000, 40 * tokens // 30), vocab=1000))
    sampler = TokenBudgetBatchSampler(dataset.sizes(), tokens, shuffle=True, seed=0, shape_grid=grid)
    collate, sizes, chosen = Collator(PAD, BOS, EOS, grid=sampler.grid), sampler.sizes, {}
    for batch in sampler.all_batches():
        shape = sampler.grid.shape(int(sizes[batch].max()))
        if len(batch) > len(chosen.get(shape, [])):
            chosen[shape] = batch
    return [collate(dataset.__getitems__(chosen[shape])) for shape in sorted(chosen)]


def inputs(kind: str, batch: dict, heads: int, d_k: int, dtype, device) -> tuple:
    """Q, K, V (B, H, L, d_k) leaves, the mask and is_causal of one kind of attention on a batch."""
    rows, length = batch["src"].shape
    q, k, v = (torch.randn(rows, heads, length, d_k, device=device, dtype=dtype, requires_grad=True)
               for _ in range(3))
    mask = None if kind == "decoder_self" else (batch["src"] != PAD).to(device)[:, None, None, :]
    return q, k, v, mask, kind == "decoder_self"


def one_pass(case: tuple, backend: SDPBackend) -> None:
    q, k, v, mask, causal = case
    with sdpa_kernel([backend]):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    out.backward(torch.ones_like(out))


def timed(cases: list[tuple], backend: SDPBackend, device: torch.device) -> float:
    """ms per batch of one round over the cases (one synchronize at its end on a GPU)."""
    start = time.perf_counter()
    for case in cases:
        one_pass(case, backend)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return 1000 * (time.perf_counter() - start) / len(cases)


def measure(args, device: torch.device, dtype: torch.dtype) -> dict:
    batches = grid_batches(args.tokens, args.grid)
    results = {}
    for kind in KINDS:
        cases = [inputs(kind, b, args.heads, args.d_k, dtype, device) for b in batches]
        for name, backend in BACKENDS.items():
            try:
                first = timed(cases, backend, device)
            except RuntimeError as error:  # the backend refuses these calls
                results[kind, name] = {"error": str(error).splitlines()[0][:200]}
                continue
            rounds = [timed(cases, backend, device) for _ in range(args.reps)]
            results[kind, name] = {"first_ms": first, "ms": statistics.median(rounds)}
    return {"shapes": [list(b["src"].shape) for b in batches],
            "kinds": {kind: {name: results[kind, name] for name in BACKENDS} for kind in KINDS}}


def markdown(result: dict) -> str:
    lines = [f"{len(result['shapes'])} shapes (rows x length) of {result['max_tokens']:,}-token batches: "
             + ", ".join(f"{r} x {n}" for r, n in result["shapes"])
             + f"; {result['heads']} heads x {result['d_k']}, {result['dtype']}, {result['device_name']}, "
             f"torch {result['torch']}; ms per batch, forward + backward", ""]
    rows = []
    for kind, backends in result["kinds"].items():
        for name, f in backends.items():
            rows.append([kind, name, *(["cannot run", "", f["error"]] if "error" in f else
                                       [f"{f['first_ms']:.2f}", f"{f['ms']:.2f}", ""])])
    return "\n".join([*lines, markdown_table(["attention", "backend", "first pass ms", "ms", "why not"], rows,
                                             right=[2, 3])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    parser.add_argument("--tokens", type=int, default=25_000)
    parser.add_argument("--grid", type=int, default=16, help="data.shape_grid")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-k", type=int, default=64)
    parser.add_argument("--dtype", choices=["bf16", "fp32"], help="default: bf16 on cuda, fp32 on cpu")
    parser.add_argument("--smoke", action="store_true", help="2,000-token batches, a grid of 3, fp32")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.smoke:
        args.tokens, args.grid, args.reps, args.dtype = 2000, 3, 2, "fp32"
    dtype_name = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype_name]
    result = {"benchmark": "attention_backends", "max_tokens": args.tokens, "grid": args.grid, "heads": args.heads,
              "d_k": args.d_k, "dtype": dtype_name, "reps": args.reps, "device": args.device, **machine(device),
              **measure(args, device, dtype)}
    emit(result, markdown(result), args.json)


if __name__ == "__main__":
    main()
