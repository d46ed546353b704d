"""The output layer + label-smoothed loss of a training step, forward + backward (issue 34): what
`TranslationModule` runs after the decoder's last LayerNorm, on the same (rows x d) states, tied
(vocab x d) weight without a bias and targets (~5% padding), label smoothing 0.1, per token.

    python experiments/benchmarks/loss_speed.py [--device cuda|cpu] [--rows 24800] [--d 512 1024]
        [--vocab 37000] [--precision bf16|fp32] [--padding 0.05] [--reps 10] [--warmup 2] [--compile]
        [--smoke] [--json PATH]

Systems: previous (the chunked loss it replaced, copied below: fp32 logits per chunk), fused
(`output_layer_loss`), fused over the vocabulary padded to a multiple of 128 (module.vocab_multiple),
the two compiled as module.compile compiles them (--compile), and Liger-Kernel's fused linear
cross-entropy (CUDA, where it imports); one that cannot run is listed with why. Each repetition the
systems take turns; the median of --reps passes after --warmup counts, with (on a GPU) the peak memory
of a pass, and the loss's and gradients' differences to the plain fp32 loss of the whole logits of
each system's first pass. --smoke: 2,000 x 64 x 5,000 in fp32, 5 repetitions (seconds on a CPU).
"""

import statistics
import sys
from collections.abc import Callable

import harness
import torch
import torch.nn.functional as F

from transformer_mt.markdown import markdown_table
from transformer_mt.training.loss import chunk_loss, label_smoothed_nll_loss, output_layer_loss

PAD, EPSILON = 0, 0.1
SYSTEMS = ("previous", "fused", "fused, vocab /128", "fused+compile", "fused+compile, vocab /128", "liger")
VOCAB_MULTIPLE = 128  # module.vocab_multiple of the "vocab /128" systems


def previous_output_layer_loss(hidden: torch.Tensor, weight: torch.Tensor, bias: None, target: torch.Tensor,
                               epsilon: float, ignore_index: int) -> tuple[torch.Tensor, None, torch.Tensor]:
    """The chunked output layer + loss before issue 34 (our own code as it was, without a bias): fp32
    logits per chunk, the gradients computed chunk by chunk in the forward pass."""
    chunk_rows = max(1, (1 << 20 if hidden.device.type == "cpu" else 1 << 26) // weight.size(0))
    hidden, target = hidden.reshape(-1, hidden.size(-1)), target.reshape(-1)
    keep = target != ignore_index
    labels = torch.where(keep, target, 0)  # any valid index: these rows are zeroed
    return _Previous.apply(hidden, weight, labels, keep, epsilon, chunk_rows), None, keep.sum()


def previous_chunk(h: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, keep: torch.Tensor,
                   epsilon: float) -> tuple[torch.Tensor, ...]:
    """One chunk of `previous_output_layer_loss`: its summed loss and its gradients."""
    logits = F.linear(h, weight).float()
    lse = logits.logsumexp(dim=-1)
    nll = lse - logits.gather(-1, labels[:, None]).squeeze(-1)
    smooth = lse - logits.mean(dim=-1)  # mean over the vocabulary of -log p
    loss_sum = torch.where(keep, (1.0 - epsilon) * nll + epsilon * smooth, 0.0).sum()
    grad = logits.sub_(lse[:, None]).exp_().sub_(epsilon / weight.size(0))  # in place: softmax - eps / V
    grad.scatter_add_(-1, labels[:, None], torch.full_like(grad[:, :1], epsilon - 1.0))
    return loss_sum, torch.where(keep[:, None], grad.to(weight.dtype) @ weight, 0.0), grad.T @ torch.where(
        keep[:, None], h, 0.0).float()


class _Previous(torch.autograd.Function):
    """The previous autograd function: the forward pass keeps the gradients, the backward scales them."""

    @staticmethod
    def forward(ctx, hidden, weight, labels, keep, epsilon: float, chunk_rows: int):
        loss_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_hidden, grad_weight = torch.empty_like(hidden), torch.zeros_like(weight, dtype=torch.float32)
        for start in range(0, hidden.size(0), chunk_rows):
            rows = slice(start, start + chunk_rows)
            loss, grad_hidden[rows], grad_w = previous_chunk(hidden[rows], weight, labels[rows], keep[rows], epsilon)
            loss_sum += loss
            grad_weight += grad_w
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.dtypes = (hidden.dtype, weight.dtype)
        return loss_sum

    @staticmethod
    def backward(ctx, grad_loss):
        return *((g * grad_loss).to(dtype) for g, dtype in zip(ctx.saved_tensors, ctx.dtypes)), None, None, None, None


Loss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def per_token(fn) -> Loss:
    """A loss of ours as training uses it: the summed loss over the target-token count."""
    def loss(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss_sum, _, ntokens = fn(hidden, weight, None, target, EPSILON, PAD)
        return loss_sum / ntokens
    return loss


def liger_loss(device: torch.device) -> Loss | str:
    """Liger-Kernel's fused linear cross-entropy, per token; or why it does not run here."""
    if device.type != "cuda":
        return "not run: Liger-Kernel's kernels are Triton kernels for CUDA"
    try:
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
    except ImportError as error:
        return f"not run: liger_kernel does not import ({type(error).__name__}: {error})"

    module = LigerFusedLinearCrossEntropyLoss(ignore_index=PAD, label_smoothing=EPSILON, reduction="sum")

    def loss(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        out = module(weight, hidden, target)
        out = out[0] if isinstance(out, tuple) else getattr(out, "loss", out)  # releases differ in what they return
        return out / (target != PAD).sum()
    return loss


def systems_for(device: torch.device, compile_: bool) -> tuple[dict[str, Loss], dict[str, str]]:
    """The systems that run here, and for each one that does not, why."""
    run: dict[str, Loss] = {"previous": per_token(previous_output_layer_loss), "fused": per_token(output_layer_loss),
                            "fused, vocab /128": per_token(lambda *a: output_layer_loss(
                                *a, vocab_multiple=VOCAB_MULTIPLE))}
    skipped = {}
    if compile_:
        compiled = torch.compile(chunk_loss, fullgraph=True, dynamic=False)
        run["fused+compile"] = per_token(lambda *a: output_layer_loss(*a, chunk_fn=compiled))
        run["fused+compile, vocab /128"] = per_token(lambda *a: output_layer_loss(
            *a, chunk_fn=compiled, vocab_multiple=VOCAB_MULTIPLE))
    else:
        for name in ("fused+compile", "fused+compile, vocab /128"):
            skipped[name] = "not run: no --compile (inductor takes minutes on a CPU)"
    liger = liger_loss(device)
    if isinstance(liger, str):
        skipped["liger"] = liger
    else:
        run["liger"] = liger
    return run, skipped


def inputs(rows: int, d: int, vocab: int, padding: float, device: torch.device, seed: int = 0):
    """Decoder states ~ N(0, 1) (after a LayerNorm), a weight initialized as our embeddings (std d^-1/2),
    targets in [4, vocab) with a `padding` fraction of PAD."""
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(rows, d, generator=g).to(device).requires_grad_()
    weight = (torch.randn(vocab, d, generator=g) * d**-0.5).to(device).requires_grad_()
    target = torch.randint(4, vocab, (rows,), generator=g)
    target[torch.rand(rows, generator=g) < padding] = PAD
    return hidden, weight, target.to(device)


def reference(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, cpu_limit_gb: float) -> dict | None:
    """The loss and gradients of the plain path, in fp32 with no autocast; None where the logits and
    their gradients (about four (rows x vocab) fp32 tensors) would not fit."""
    need = 4 * 4 * hidden.size(0) * weight.size(0)
    room = torch.cuda.mem_get_info(hidden.device)[0] * 0.8 if hidden.is_cuda else cpu_limit_gb * 2**30
    if need > room:
        return None
    hidden.grad = weight.grad = None
    loss_sum, _, ntokens = label_smoothed_nll_loss(F.linear(hidden, weight), target, EPSILON, PAD)
    loss = loss_sum / ntokens
    loss.backward()
    out = {"loss": loss.item(), "hidden": hidden.grad.detach().clone(), "weight": weight.grad.detach().clone()}
    hidden.grad = weight.grad = None
    return out


def differences(loss: torch.Tensor, hidden: torch.Tensor, weight: torch.Tensor, ref: dict | None) -> dict:
    """|loss - reference| and, per gradient, the largest |difference| alone and over the reference's largest |value|."""
    if ref is None:
        return {}
    out = {"loss_diff": abs(loss.item() - ref["loss"])}
    for name, grad in (("hidden", hidden.grad), ("weight", weight.grad)):
        diff = (grad.float() - ref[name]).abs().max().item()
        out[f"grad_{name}_max_abs_diff"] = diff
        out[f"grad_{name}_rel_diff"] = diff / max(ref[name].abs().max().item(), 1e-30)
    out["grad_rel_diff"] = max(out["grad_hidden_rel_diff"], out["grad_weight_rel_diff"])
    return out


def one_pass(fn: Loss, hidden, weight, target, dtype: torch.dtype | None) -> tuple[torch.Tensor, float, float | None]:
    """A forward + backward pass from fresh gradients: the loss, its seconds and, on a GPU, its peak
    memory above what was allocated before it (GiB)."""
    device = hidden.device
    hidden.grad = weight.grad = None
    if device.type == "cuda":
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)

    def run() -> torch.Tensor:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = fn(hidden, weight, target)
        loss.backward()
        return loss

    seconds, loss = harness.timed(run, device)
    peak = (torch.cuda.max_memory_allocated(device) - base) / 2**30 if device.type == "cuda" else None
    return loss.detach(), seconds, peak


def measure(d: int, args, device: torch.device) -> dict:
    """Every system at this width: interleaved repetitions, accuracy from each one's first pass."""
    hidden, weight, target = inputs(args.rows, d, args.vocab, args.padding, device)
    dtype = torch.bfloat16 if args.precision == "bf16" else None
    ref = reference(hidden, weight, target, args.cpu_reference_gb)
    run, skipped = systems_for(device, args.compile)
    results = {name: {"system": name, "status": "skipped", "note": reason} for name, reason in skipped.items()}
    for name in run:
        results[name] = {"system": name, "status": "ok", "seconds": [], "peak_gb": []}
    for rep in range(args.warmup + args.reps):
        for name in harness.order(list(run), rep):  # each first in turn
            record = results[name]
            if record["status"] != "ok":
                continue
            try:
                loss, seconds, peak = one_pass(run[name], hidden, weight, target, dtype)
            except Exception as error:  # a peer that fails is reported, the others still run
                record.update(status="failed", note=f"{type(error).__name__}: {str(error).splitlines()[0]}")
                continue
            if rep == 0:
                record.update(first_pass_s=seconds, **differences(loss, hidden, weight, ref))
            elif rep >= args.warmup:
                record["seconds"].append(seconds)
                record["peak_gb"].append(peak)
    previous = results["previous"]
    for record in results.values():
        times = record.pop("seconds", [])
        peaks = [p for p in record.pop("peak_gb", []) if p is not None]
        if record["status"] == "ok" and times:
            record["ms"] = 1000 * statistics.median(times)
            record["ms_all"] = [round(1000 * t, 3) for t in times]
            record["peak_gb"] = max(peaks) if peaks else None
    for record in results.values():
        if "ms" in record and "ms" in previous:
            record["speedup_vs_previous"] = previous["ms"] / record["ms"]
    hidden.grad = weight.grad = None
    return {"d": d, "reference": None if ref is None else {"loss": ref["loss"]},
            "reference_note": None if ref else "the whole logits do not fit: no accuracy figures",
            "systems": [results[name] for name in SYSTEMS]}


def number(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def markdown(result: dict) -> str:
    lines = [f"{result['rows']:,} rows ({result['padding']:.0%} padding) x vocabulary {result['vocab']:,}, "
             f"{result['precision']}, {harness.described(result)}; median of {result['reps']} forward + backward "
             "passes", ""]
    rows = [[width["d"], r["system"], number(r.get("ms"), ".2f"), number(r.get("speedup_vs_previous"), ".2f"),
             number(r.get("peak_gb"), ".2f"), number(r.get("loss_diff"), ".1e"), number(r.get("grad_rel_diff"), ".1e"),
             r.get("note", "")] for width in result["widths"] for r in width["systems"]]
    columns = ["d", "system", "ms", "previous / this", "peak GB", "loss diff", "grad diff (rel.)", "note"]
    return "\n".join([*lines, markdown_table(columns, rows, right=(0, 2, 3, 4, 5, 6))])


def main() -> None:
    parser = harness.parser(__doc__, device="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=24_800, help="target positions (a 25k-token batch's)")
    parser.add_argument("--d", type=int, nargs="+", default=[512, 1024], help="model widths")
    parser.add_argument("--vocab", type=int, default=37_000)
    parser.add_argument("--precision", choices=["bf16", "fp32"], help="default: bf16 on cuda, fp32 on cpu")
    parser.add_argument("--padding", type=float, default=0.05, help="fraction of padding targets")
    parser.add_argument("--reps", type=int, default=10, help="timed passes per system")
    parser.add_argument("--warmup", type=int, default=2, help="untimed passes first (the first one gives the accuracy)")
    parser.add_argument("--compile", action="store_true", help="also fused+compile (inductor)")
    parser.add_argument("--cpu-reference-gb", type=float, default=4.0, help="the most the CPU reference may take")
    parser.add_argument("--smoke", action="store_true", help="2,000 x 64 x 5,000 in fp32: seconds on a CPU")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.d, args.vocab, args.reps, args.warmup = 2000, [64], 5000, 5, 1
        args.precision = args.precision or "fp32"
    device = torch.device(args.device)
    args.precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")
    print(f"[loss_speed] {args.rows} x {args.d} x {args.vocab}, {args.precision}, {device}", file=sys.stderr)
    widths = [measure(d, args, device) for d in args.d]
    result = {"benchmark": "loss_speed", "device": args.device, **harness.machine(args.device),
              **{k: getattr(args, k) for k in ("precision", "rows", "vocab", "padding", "reps", "warmup", "compile")},
              "widths": widths}
    harness.emit(result, markdown(result), args.json)


if __name__ == "__main__":
    main()
