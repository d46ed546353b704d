"""Attention forward + backward, the base model's three kinds (README.md): padded SDPA against packed_attention
on the same batches; --backends: each SDPA backend alone on a shape grid. --smoke: 3 batches of 2,000 tokens."""

import itertools
import math
import statistics
import sys
from dataclasses import replace

import harness
import torch
import torch.nn.functional as F
from harness import BOS, EOS, PAD, synthetic_pairs
from torch.nn.attention import SDPBackend, sdpa_kernel

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset
from transformer_mt.markdown import markdown_table
from transformer_mt.model.attention import packed_attention, sdpa, uses_varlen_kernel
from transformer_mt.model.sdpa_backends import SdpaCall, backend_of
from transformer_mt.packing import Varlen

KINDS = ("encoder_self", "decoder_self", "cross")
HEADS, D_K = 8, 64
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}


class Case:
    """One kind of attention on one batch: fused projections (leaves) in both layouts, the gradient from above."""

    def __init__(self, kind: str, padded: dict, packed: dict, dtype: torch.dtype, device: torch.device,
                 generator: torch.Generator) -> None:
        src, tgt = (replace(p, cu_seqlens=p.cu_seqlens.to(device), positions=p.positions.to(device),
                            segments=p.segments.to(device)) for p in (packed["packing"].src, packed["packing"].tgt))
        self.kind, self.causal = kind, kind == "decoder_self"
        queries, keys = (src, src) if kind == "encoder_self" else (tgt, tgt) if self.causal else (tgt, src)
        self.layout = Varlen(queries, keys)
        self.mask = None if self.causal else (padded["src"] != PAD).to(device)[:, None, None, :]

        def leaf(rows: int, parts: int) -> torch.Tensor:
            return torch.randn(rows, parts * HEADS * D_K, generator=generator, device=device).to(dtype)

        self.streams = [tgt, src] if kind == "cross" else [queries]
        fused = [leaf(tgt.segments.numel(), 1), leaf(src.segments.numel(), 2)] if kind == "cross" else [
            leaf(queries.segments.numel(), 3)]
        self.packed_inputs = [x.requires_grad_() for x in fused]
        self.padded_inputs = [s.unpack(x.detach()).requires_grad_() for s, x in zip(self.streams, fused)]
        self.grad = torch.randn(queries.segments.numel(), HEADS * D_K, generator=generator, device=device).to(dtype)
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
        parts = [p for x in tensors for p in x.chunk(x.size(-1) // (HEADS * D_K), dim=-1)]
        heads = [p.unflatten(-1, (HEADS, D_K)) for p in parts]
        return tuple(h.transpose(1, 2) for h in heads) if padded else tuple(heads)

    def padded_pass(self) -> torch.Tensor:
        """Padded attention forward + backward; its output (B, L, H x d_k)."""
        for x in self.padded_inputs:
            x.grad = None
        out = sdpa(*self.split(self.padded_inputs, padded=True), self.mask, 0.0, self.causal)
        out = out.transpose(1, 2).reshape(out.size(0), out.size(2), -1)
        out.backward(self.padded_grad)
        return out

    def packed_pass(self) -> torch.Tensor:
        """Packed attention forward + backward; its output (N, H x d_k)."""
        for x in self.packed_inputs:
            x.grad = None
        out = packed_attention(*self.split(self.packed_inputs, padded=False), self.layout, self.causal, 0.0).flatten(1)
        out.backward(self.grad)
        return out

    def figures(self) -> dict:
        """Each path's kernel; the packed outputs and gradients against the padded ones at real positions."""
        q, k, v = (x.detach() for x in self.split(self.padded_inputs, padded=True))
        kernel = "varlen" if uses_varlen_kernel(self.split(self.packed_inputs, padded=False)[0], 0.0) else "reference"
        padded, packed = self.padded_pass(), self.packed_pass()
        grads = [(s.pack(p.grad) - x.grad).float().abs().max().item()
                 for s, p, x in zip(self.streams, self.padded_inputs, self.packed_inputs)]
        return {"padded_backend": backend_of(SdpaCall(q, k, v, self.mask, 0.0, self.causal)), "packed_kernel": kernel,
                "out_max_abs_diff": (self.layout.queries.pack(padded) - packed).float().abs().max().item(),
                "grad_max_abs_diff": max(grads)}


def round_ms(passes: list, device: torch.device) -> float:
    return 1000 * harness.timed(lambda: [run() for run in passes], device)[0] / len(passes)


def padded_against_packed(args, device: torch.device, dtype: torch.dtype) -> dict:
    """--batches training batches of --tokens padded tokens, each collated padded and packed: per kind, each path."""
    mean = 25 * math.exp(0.6**2 / 2) + 1  # mean padded size of a pair
    dataset = TranslationDataset(synthetic_pairs(int(1.3 * args.batches * args.tokens / mean) + 200, vocab=1000))
    padded, packed = Collator(PAD, BOS, EOS), Collator(PAD, BOS, EOS, packed=True)
    data = [(padded(rows), packed(rows)) for rows in map(dataset.__getitems__, itertools.islice(
        TokenBudgetBatchSampler(dataset.sizes(), args.tokens, shuffle=True, seed=0), args.batches))]
    generator, kinds = torch.Generator(device).manual_seed(0), {}
    for kind in KINDS:
        cases = [Case(kind, padded, packed, dtype, device, generator) for padded, packed in data]
        diffs = [case.figures() for case in cases]  # also the warm-up
        figures = {**diffs[0], "padding": statistics.fmean(case.padding for case in cases),
                   **{key: max(d[key] for d in diffs) for key in ("out_max_abs_diff", "grad_max_abs_diff")}}
        paths = {path: [getattr(case, f"{path}_pass") for case in cases] for path in ("padded", "packed")}
        measured = harness.rounds({path: lambda p=p: round_ms(p, device) for path, p in paths.items()}, args.reps)
        for path in paths:
            figures[f"{path}_ms"] = statistics.median(m[path] for m in measured)
        kinds[kind] = {**figures, "padded_over_packed": figures["padded_ms"] / figures["packed_ms"]}
    padded_ms, packed_ms = (sum(kinds[k][f"{p}_ms"] for k in KINDS) for p in ("padded", "packed"))
    shapes = [{"sentences": len(p["id"]), "src_padded": list(p["src"].shape), "tgt_padded": list(p["tgt_in"].shape),
               "src_tokens": int(p["num_src_tokens"]), "tgt_tokens": int(q["tgt_in"].numel())} for p, q in data]
    return {"kinds": kinds, "total": {"padded_ms": padded_ms, "packed_ms": packed_ms,
                                      "padded_over_packed": padded_ms / packed_ms}, "batches": shapes}


def backend_pass(case: tuple, backend: SDPBackend) -> None:
    q, k, v, mask, causal = case
    with sdpa_kernel([backend]):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    out.backward(torch.ones_like(out))


def each_backend(args, device: torch.device, dtype: torch.dtype) -> dict:
    """Per kind and backend, on the fullest batch of each shape of the grid: the first round's ms per batch and
    the median of --reps (or why not)."""
    dataset = TranslationDataset(synthetic_pairs(max(20_000, 40 * args.tokens // 30), vocab=1000))
    sampler = TokenBudgetBatchSampler(dataset.sizes(), args.tokens, shuffle=True, seed=0, shape_grid=args.grid)
    chosen, kinds = {}, {}
    for batch in sampler.all_batches():
        shape = sampler.grid.shape(int(sampler.sizes[batch].max()))
        chosen[shape] = batch if len(batch) > len(chosen.get(shape, [])) else chosen[shape]
    data = [Collator(PAD, BOS, EOS, grid=sampler.grid)(dataset.__getitems__(chosen[s])) for s in sorted(chosen)]
    for kind in KINDS:
        cases = []
        for batch in data:  # Q, K, V (B, H, L, d_k) leaves, the mask and is_causal of the kind on the batch
            rows, length = batch["src"].shape
            q, k, v = (torch.randn(rows, HEADS, length, D_K, device=device, dtype=dtype, requires_grad=True)
                       for _ in range(3))
            mask = None if kind == "decoder_self" else (batch["src"] != PAD).to(device)[:, None, None, :]
            cases.append((q, k, v, mask, kind == "decoder_self"))
        passes = {name: [lambda c=c, b=b: backend_pass(c, b) for c in cases] for name, b in BACKENDS.items()}
        kinds[kind] = {}
        for name in BACKENDS:
            try:
                kinds[kind][name] = {"first_ms": round_ms(passes[name], device)}
            except RuntimeError as error:  # the backend refuses these calls
                kinds[kind][name] = {"error": str(error).splitlines()[0][:200]}
        running = {name: passes[name] for name, f in kinds[kind].items() if "error" not in f}
        measured = harness.rounds({name: lambda p=p: round_ms(p, device) for name, p in running.items()}, args.reps)
        for name in running:
            kinds[kind][name]["ms"] = statistics.median(m[name] for m in measured)
    return {"shapes": [list(b["src"].shape) for b in data], "kinds": kinds}


def markdown(result: dict) -> str:
    head = f"{result['heads']} heads x {result['d_k']}, {result['dtype']}, {harness.described(result)}"
    if result["benchmark"] == "attention_backends":
        lines = [f"{len(result['shapes'])} shapes (rows x length) of {result['max_tokens']:,}-token batches: "
                 + ", ".join(f"{r} x {n}" for r, n in result["shapes"]) + f"; {head}; ms per batch", ""]
        rows = [[kind, name, *(["cannot run", "", f["error"]] if "error" in f else
                               [f"{f['first_ms']:.2f}", f"{f['ms']:.2f}", ""])]
                for kind, backends in result["kinds"].items() for name, f in backends.items()]
        return "\n".join([*lines, markdown_table(["attention", "backend", "first pass ms", "ms", "why not"], rows,
                                                 right=[2, 3])])
    shapes = result["batches"]
    slots = sum(math.prod(b["src_padded"]) + math.prod(b["tgt_padded"]) for b in shapes)
    tokens = sum(b["src_tokens"] + b["tgt_tokens"] for b in shapes)
    lines = [f"{len(shapes)} batches of {result['max_tokens']:,} padded tokens (on average "
             f"{statistics.fmean(b['sentences'] for b in shapes):.0f} sentences, {1 - tokens / slots:.1%} of the "
             f"padded tokens padding), {head}; median of {result['reps']} rounds", ""]
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
    parser = harness.parser(__doc__, device="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens", type=int, default=25_000, help="max padded tokens per batch")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--backends", action="store_true", help="each SDPA backend on the shapes of a grid")
    parser.add_argument("--grid", type=int, default=16, help="data.shape_grid of --backends")
    parser.add_argument("--smoke", action="store_true", help="3 batches (a grid of 3) of 2,000 tokens, fp32")
    args = parser.parse_args()
    args.reps = 5
    if args.smoke:
        args.tokens, args.batches, args.grid, args.reps = 2000, 3, 3, 3
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" and not args.smoke else torch.float32
    name = "attention_backends" if args.backends else "attention_speed"
    print(f"[{name}] {args.tokens} tokens a batch, {dtype}, {device}", file=sys.stderr)
    measure = each_backend if args.backends else padded_against_packed
    result = {"benchmark": name, "device": args.device, **harness.machine(args.device),
              "dtype": "bf16" if dtype == torch.bfloat16 else "fp32", "max_tokens": args.tokens,
              **({"grid": args.grid} if args.backends else {}), "heads": HEADS, "d_k": D_K, "reps": args.reps,
              **measure(args, device, dtype)}
    harness.save(result, args.json, markdown(result))


if __name__ == "__main__":
    main()
