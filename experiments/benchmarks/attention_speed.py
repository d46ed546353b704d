"""Attention on padded batches against packed ones (issue 34): the three kinds of attention of the
base model, forward + backward, on the batches a training run gets.

    python experiments/benchmarks/attention_speed.py [--device cuda|cpu] [--tokens 25000] [--batches 8]
        [--reps 5] [--heads 8] [--d-k 64] [--dtype bf16|fp32] [--smoke] [--json PATH]

Sentence lengths as loop_speed.py draws them (synthetic.py's `synthetic_pairs`: lognormal, median 25
tokens, the target's correlated with the source's), cut into --tokens batches by
`TokenBudgetBatchSampler` and collated by `Collator` twice, padded and packed (`data.packed`). For
each batch and kind (encoder self-attention, decoder self-attention, cross-attention), the same Q, K,
V, laid out as the model lays them out (heads split from a fused projection):
- padded: `model.attention.sdpa` on (B, H, L, d_k) with the source's key-padding mask, or
  is_causal=True for decoder self-attention, then the heads merged, as the model does now;
- packed: `model.attention.packed_attention` on (tokens, H, d_k) streams: torch's varlen kernel on
  CUDA in bf16 / fp16, the reference path (unpack, SDPA, pack back) otherwise.
A round runs one path over every batch back to back, timed as a whole (CUDA events and one
synchronize at its end on a GPU); the two paths take turns going first for --reps rounds, and the
median round counts.
Reports milliseconds per batch for each, padded / packed, the padding (the share of the score
entries that padding adds: (B x L x S) against the sentences' own), the kernel each ran, and the
largest difference between the packed outputs and gradients and the padded ones at real positions.
Prints a Markdown table; --json writes every figure. --smoke: 2,000-token batches, 3 of them, fp32.
"""

import argparse
import itertools
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from output import emit, machine
from sdpa_backends import SdpaCall, backend_of
from synthetic import BOS, EOS, PAD, synthetic_pairs

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset
from transformer_mt.markdown import markdown_table
from transformer_mt.model.attention import packed_attention, sdpa, uses_varlen_kernel
from transformer_mt.packing import Packed, Varlen

KINDS = ("encoder_self", "decoder_self", "cross")


def on(packed: Packed, device: torch.device) -> Packed:
    return replace(packed, cu_seqlens=packed.cu_seqlens.to(device), positions=packed.positions.to(device),
                   segments=packed.segments.to(device))


def batches(tokens: int, count: int, seed: int = 0) -> list[tuple[dict, dict]]:
    """`count` training batches of `tokens` padded tokens, each collated padded and packed."""
    mean = 25 * math.exp(0.6**2 / 2) + 1  # mean padded size of a pair
    table = synthetic_pairs(int(1.3 * count * tokens / mean) + 200, vocab=1000, seed=seed)
    dataset = TranslationDataset(table)
    sampler = TokenBudgetBatchSampler(dataset.sizes(), tokens, shuffle=True, seed=seed)
    padded, packed = Collator(PAD, BOS, EOS), Collator(PAD, BOS, EOS, packed=True)
    out = []
    for indices in itertools.islice(iter(sampler), count):
        rows = dataset.__getitems__(indices)
        out.append((padded(rows), packed(rows)))
    return out


class Case:
    """One kind of attention on one batch: fused projections (leaves) in both layouts, and the
    gradient the layer above sends back."""

    def __init__(self, kind: str, padded: dict, packed: dict, heads: int, d_k: int, dtype: torch.dtype,
                 device: torch.device, generator: torch.Generator) -> None:
        packing = packed["packing"]
        src, tgt = on(packing.src, device), on(packing.tgt, device)
        self.kind, self.heads, self.d_k = kind, heads, d_k
        self.causal = kind == "decoder_self"
        queries, keys = (src, src) if kind == "encoder_self" else (tgt, tgt) if self.causal else (tgt, src)
        self.layout = Varlen(queries, keys)
        key_tokens = padded["src"] if kind != "decoder_self" else padded["tgt_in"]
        self.mask = None if self.causal else (key_tokens != PAD).to(device)[:, None, None, :]
        width = heads * d_k

        def leaf(rows: int, parts: int) -> torch.Tensor:
            return torch.randn(rows, parts * width, generator=generator, device=device).to(dtype)

        if kind == "cross":
            fused = [leaf(tgt.segments.numel(), 1), leaf(src.segments.numel(), 2)]
            streams = [tgt, src]
        else:
            fused = [leaf(queries.segments.numel(), 3)]
            streams = [queries]
        self.packed_inputs = [x.requires_grad_() for x in fused]
        self.padded_inputs = [s.unpack(x.detach()).requires_grad_() for s, x in zip(streams, fused)]
        self.streams = streams
        self.grad = torch.randn(queries.segments.numel(), width, generator=generator, device=device).to(dtype)
        self.padded_grad = queries.unpack(self.grad)
        lengths_q, lengths_k = queries.lengths().double().cpu(), keys.lengths().double().cpu()
        rows, lq, lk = queries.count, queries.max_length, keys.max_length
        if self.causal:  # the score entries a causal kernel computes: the lower triangle
            real, computed = (lengths_q * (lengths_q + 1) / 2).sum(), rows * lq * (lq + 1) / 2
        else:
            real, computed = (lengths_q * lengths_k).sum(), rows * lq * lk
        self.padding = 1 - float(real) / computed

    def split(self, tensors: list[torch.Tensor], padded: bool) -> tuple[torch.Tensor, ...]:
        """Q, K, V as the model splits its fused projections: (B, H, L, d_k) views, or (N, H, d_k)."""
        parts = [p for x in tensors for p in x.chunk(x.size(-1) // (self.heads * self.d_k), dim=-1)]
        heads = [p.unflatten(-1, (self.heads, self.d_k)) for p in parts]
        return tuple(h.transpose(1, 2) for h in heads) if padded else tuple(heads)

    def padded_pass(self) -> torch.Tensor:
        """Padded attention forward + backward; its output (B, L, H x d_k)."""
        for x in self.padded_inputs:
            x.grad = None
        q, k, v = self.split(self.padded_inputs, padded=True)
        out = sdpa(q, k, v, self.mask, 0.0, self.causal)
        out = out.transpose(1, 2).reshape(out.size(0), out.size(2), -1)
        out.backward(self.padded_grad)
        return out

    def packed_pass(self) -> torch.Tensor:
        """Packed attention forward + backward; its output (N, H x d_k)."""
        for x in self.packed_inputs:
            x.grad = None
        q, k, v = self.split(self.packed_inputs, padded=False)
        out = packed_attention(q, k, v, self.layout, self.causal, 0.0).flatten(1)
        out.backward(self.grad)
        return out

    def kernels(self) -> tuple[str, str]:
        """The SDPA backend of the padded call, and the packed path's kernel (varlen or reference)."""
        q, k, v = self.split(self.padded_inputs, padded=True)
        backend = backend_of(SdpaCall(q.detach(), k.detach(), v.detach(), self.mask, 0.0, self.causal))
        q = self.split(self.packed_inputs, padded=False)[0]
        return backend, "varlen" if uses_varlen_kernel(q, 0.0) else "reference"

    def differences(self) -> dict:
        """The packed output and input gradients against the padded ones, at real positions."""
        padded, packed = self.padded_pass(), self.packed_pass()
        queries = self.layout.queries
        out = {"out_max_abs_diff": (queries.pack(padded) - packed).float().abs().max().item()}
        grads = [(s.pack(p.grad) - x.grad).float().abs().max().item()
                 for s, p, x in zip(self.streams, self.padded_inputs, self.packed_inputs)]
        return {**out, "grad_max_abs_diff": max(grads)}


class Clock:
    """Times a whole round of passes without waiting for the device in between: CUDA events around
    it and one synchronize at its end on a GPU (a synchronize per pass would add each launch's
    latency to the time), the host clock on a CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def start(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds_since(self, start) -> float:
        if not self.cuda:
            return time.perf_counter() - start
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000


def timed_round(passes: list, clock: Clock) -> float:
    """Seconds for `passes` (callables) run back to back."""
    start = clock.start()
    for fn in passes:
        fn()
    return clock.seconds_since(start)


def measure(args, device: torch.device, dtype: torch.dtype) -> dict:
    data = batches(args.tokens, args.batches)
    generator = torch.Generator(device).manual_seed(0)
    cases = {kind: [Case(kind, padded, packed, args.heads, args.d_k, dtype, device, generator)
                    for padded, packed in data] for kind in KINDS}
    kinds = {}
    for kind, runs in cases.items():
        backend, kernel = runs[0].kernels()
        diffs = [case.differences() for case in runs]  # also the warm-up
        kinds[kind] = {"padded_backend": backend, "packed_kernel": kernel,
                       "padding": statistics.fmean(case.padding for case in runs),
                       "out_max_abs_diff": max(d["out_max_abs_diff"] for d in diffs),
                       "grad_max_abs_diff": max(d["grad_max_abs_diff"] for d in diffs)}
    rounds = {kind: {"padded": [], "packed": []} for kind in KINDS}
    clock = Clock(device)
    for rep in range(args.reps):
        for kind, runs in cases.items():
            paths = {"padded": [case.padded_pass for case in runs], "packed": [case.packed_pass for case in runs]}
            for path in paths if rep % 2 == 0 else reversed(paths):  # each first in turn
                rounds[kind][path].append(1000 * timed_round(paths[path], clock) / len(runs))
    for kind, figures in kinds.items():
        for path in ("padded", "packed"):
            figures[f"{path}_ms"] = statistics.median(rounds[kind][path])
            figures[f"{path}_ms_all"] = [round(ms, 3) for ms in rounds[kind][path]]
        figures["padded_over_packed"] = figures["padded_ms"] / figures["packed_ms"]
    padded_ms, packed_ms = (sum(kinds[k][f"{p}_ms"] for k in KINDS) for p in ("padded", "packed"))
    shapes = [{"sentences": len(p["id"]), "src_padded": list(p["src"].shape), "tgt_padded": list(p["tgt_in"].shape),
               "src_tokens": int(p["num_src_tokens"]), "tgt_tokens": int(q["tgt_in"].numel())} for p, q in data]
    return {"kinds": kinds, "total": {"padded_ms": padded_ms, "packed_ms": packed_ms,
                                      "padded_over_packed": padded_ms / packed_ms}, "batches": shapes}


def markdown(result: dict) -> str:
    shapes = result["batches"]
    slots = sum(math.prod(b["src_padded"]) + math.prod(b["tgt_padded"]) for b in shapes)
    tokens = sum(b["src_tokens"] + b["tgt_tokens"] for b in shapes)
    lines = [f"{len(shapes)} batches of {result['max_tokens']:,} padded tokens (on average "
             f"{statistics.fmean(b['sentences'] for b in shapes):.0f} sentences, {1 - tokens / slots:.1%} of the "
             f"padded tokens padding), {result['heads']} heads x {result['d_k']}, {result['dtype']}, "
             f"{result['device_name']}, torch {result['torch']}; median of {result['reps']} rounds", ""]
    rows = [[kind, f["padded_backend"], f["packed_kernel"], f"{f['padded_ms']:.2f}", f"{f['packed_ms']:.2f}",
             f"{f['padded_over_packed']:.2f}", f"{f['padding']:.1%}",
             f"{f['out_max_abs_diff']:.1e} / {f['grad_max_abs_diff']:.1e}"] for kind, f in result["kinds"].items()]
    total = result["total"]
    rows.append(["all three", "", "", f"{total['padded_ms']:.2f}", f"{total['packed_ms']:.2f}",
                 f"{total['padded_over_packed']:.2f}", "", ""])
    columns = ["attention", "padded kernel", "packed kernel", "padded ms/batch", "packed ms/batch", "padded / packed",
               "padding (score entries)", "max diff out / grad"]
    return "\n".join([*lines, markdown_table(columns, rows, right=range(3, 8))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    parser.add_argument("--tokens", type=int, default=25_000, help="max padded tokens per batch")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--reps", type=int, default=5, help="timed rounds over the batches")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-k", type=int, default=64)
    parser.add_argument("--dtype", choices=["bf16", "fp32"], help="default: bf16 on cuda, fp32 on cpu")
    parser.add_argument("--smoke", action="store_true", help="3 batches of 2,000 tokens, fp32: seconds on a CPU")
    parser.add_argument("--json", type=Path, help="write every figure here as JSON")
    args = parser.parse_args()
    if args.smoke:
        args.tokens, args.batches, args.reps = 2000, 3, 3
        args.dtype = args.dtype or "fp32"
    device = torch.device(args.device)
    args.dtype = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    print(f"[attention_speed] {args.batches} batches of {args.tokens} tokens, {args.dtype}, {device}", file=sys.stderr)
    result = {"benchmark": "attention_speed", "device": args.device, **machine(device), "dtype": args.dtype,
              "max_tokens": args.tokens, "heads": args.heads, "d_k": args.d_k, "reps": args.reps,
              **measure(args, device, dtype)}
    emit(result, markdown(result), args.json)


if __name__ == "__main__":
    main()
