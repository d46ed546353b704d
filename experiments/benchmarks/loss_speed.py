"""The output layer + loss, forward + backward (README.md): `previous` (issue 34's, copied below),
output_layer_loss (fused; vocabulary padded to 128s; --compile) and Liger-Kernel's, in turns, against the plain
fp32 loss. --smoke: 2,000 x 64 x 5,000 in fp32 (seconds on a CPU)."""

import statistics
import sys
from collections.abc import Callable
from functools import partial

import harness
import torch
import torch.nn.functional as F

from transformer_mt.markdown import markdown_table
from transformer_mt.training.loss import chunk_loss, label_smoothed_nll_loss, output_layer_loss

PAD, EPSILON, PADDING = 0, 0.1, 0.05
SYSTEMS = ("previous", "fused", "fused, vocab /128", "fused+compile", "fused+compile, vocab /128", "liger")
VOCAB_MULTIPLE = 128  # module.vocab_multiple of the "vocab /128" systems


class Previous(torch.autograd.Function):
    """The chunked output layer + loss before issue 34 (our own code as it was, without a bias): fp32 logits and
    the gradients per chunk in the forward, scaled in the backward. Previous.apply: the summed loss."""

    @staticmethod
    def forward(ctx, hidden, weight, target, epsilon: float):
        chunk_rows = max(1, (1 << 20 if hidden.device.type == "cpu" else 1 << 26) // weight.size(0))
        keep = target != PAD
        labels = torch.where(keep, target, 0)  # any valid index: these rows are zeroed
        loss_sum = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_hidden, grad_weight = torch.empty_like(hidden), torch.zeros_like(weight, dtype=torch.float32)
        for start in range(0, hidden.size(0), chunk_rows):
            rows = slice(start, start + chunk_rows)
            h, chunk_labels, chunk_keep = hidden[rows], labels[rows, None], keep[rows, None]
            logits = F.linear(h, weight).float()
            lse = logits.logsumexp(dim=-1)
            nll = lse - logits.gather(-1, chunk_labels).squeeze(-1)
            smooth = lse - logits.mean(dim=-1)  # mean over the vocabulary of -log p
            loss_sum += torch.where(chunk_keep[:, 0], (1.0 - epsilon) * nll + epsilon * smooth, 0.0).sum()
            grad = logits.sub_(lse[:, None]).exp_().sub_(epsilon / weight.size(0))  # in place: softmax - eps / V
            grad.scatter_add_(-1, chunk_labels, torch.full_like(grad[:, :1], epsilon - 1.0))
            grad_hidden[rows] = torch.where(chunk_keep, grad.to(weight.dtype) @ weight, 0.0)
            grad_weight += grad.T @ torch.where(chunk_keep, h, 0.0).float()
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.dtypes = (hidden.dtype, weight.dtype)
        return loss_sum

    @staticmethod
    def backward(ctx, grad_loss):
        return *((g * grad_loss).to(dtype) for g, dtype in zip(ctx.saved_tensors, ctx.dtypes)), None, None


def per_token(fn) -> Callable:
    def loss(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss_sum, _, ntokens = fn(hidden, weight, None, target, EPSILON, PAD)
        return loss_sum / ntokens
    return loss


def liger_loss(device: torch.device) -> Callable | str:
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


def systems_for(device: torch.device, compile_: bool) -> tuple[dict[str, Callable], dict[str, str]]:
    run, skipped = {"previous": lambda hidden, weight, target: Previous.apply(hidden, weight, target, EPSILON) / (
        target != PAD).sum()}, {}
    compiled = torch.compile(chunk_loss, fullgraph=True, dynamic=False) if compile_ else None
    for suffix, options in (("", {}), (", vocab /128", {"vocab_multiple": VOCAB_MULTIPLE})):
        run[f"fused{suffix}"] = per_token(partial(output_layer_loss, **options))
        if compiled:
            run[f"fused+compile{suffix}"] = per_token(partial(output_layer_loss, chunk_fn=compiled, **options))
        else:
            skipped[f"fused+compile{suffix}"] = "not run: no --compile (inductor takes minutes on a CPU)"
    liger = liger_loss(device)
    (skipped if isinstance(liger, str) else run)["liger"] = liger
    return run, skipped


def reference(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> dict | None:
    """The plain fp32 loss and gradients; None where the whole logits do not fit (a CPU: 4 GiB)."""
    need = 4 * 4 * hidden.size(0) * weight.size(0)
    room = torch.cuda.mem_get_info(hidden.device)[0] * 0.8 if hidden.is_cuda else 4 * 2**30
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
    """|loss - reference|, and the gradients' largest |difference| over the reference's largest |value|."""
    return {} if ref is None else {"loss_diff": abs(loss.item() - ref["loss"]), "grad_rel_diff": max(
        (grad.float() - ref[name]).abs().max().item() / max(ref[name].abs().max().item(), 1e-30)
        for name, grad in (("hidden", hidden.grad), ("weight", weight.grad)))}


def one_pass(fn: Callable, hidden, weight, target, dtype: torch.dtype | None) -> tuple:
    """A forward + backward pass: the loss, its seconds and on a GPU its peak memory above the start's (GiB)."""
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
    """Every system at this width in turns: the first pass's accuracy, the timed passes' median."""
    g = torch.Generator().manual_seed(0)  # states ~ N(0, 1), a weight as our embeddings (std d^-1/2), targets
    hidden = torch.randn(args.rows, d, generator=g).to(device).requires_grad_()
    weight = (torch.randn(args.vocab, d, generator=g) * d**-0.5).to(device).requires_grad_()
    target = torch.randint(4, args.vocab, (args.rows,), generator=g)
    target = torch.where(torch.rand(args.rows, generator=g) < PADDING, PAD, target).to(device)
    ref = reference(hidden, weight, target)
    run, skipped = systems_for(device, args.compile)
    results = {name: {"system": name, "status": "ok", "seconds": [], "peak_gb": []} if name in run else
               {"system": name, "status": "skipped", "note": skipped[name]} for name in SYSTEMS}
    for rep in range(args.warmup + args.reps):
        for name in harness.order(list(run), rep):  # each first in turn
            record = results[name]
            if record["status"] != "ok":
                continue
            try:
                loss, seconds, peak = one_pass(run[name], hidden, weight, target, args.dtype)
            except Exception as error:  # noqa: BLE001 - a peer that fails is reported, the others still run
                record.update(status="failed", note=f"{type(error).__name__}: {str(error).splitlines()[0]}")
                continue
            if rep == 0:
                record.update(first_pass_s=seconds, **differences(loss, hidden, weight, ref))
            elif rep >= args.warmup:
                record["seconds"].append(seconds)
                record["peak_gb"].append(peak)
    for record in results.values():  # "previous" first
        times, peaks = record.pop("seconds", []), [p for p in record.pop("peak_gb", []) if p is not None]
        if record["status"] == "ok" and times:
            record.update(ms=1000 * statistics.median(times), ms_all=[round(1000 * t, 3) for t in times],
                          peak_gb=max(peaks) if peaks else None)
        if "ms" in record and "ms" in results["previous"]:
            record["speedup_vs_previous"] = results["previous"]["ms"] / record["ms"]
    hidden.grad = weight.grad = None
    return {"d": d, "reference": None if ref is None else {"loss": ref["loss"]},
            "reference_note": None if ref else "the whole logits do not fit: no accuracy figures",
            "systems": list(results.values())}


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
    parser.add_argument("--compile", action="store_true", help="also fused+compile (inductor)")
    parser.add_argument("--smoke", action="store_true", help="2,000 x 64 x 5,000 in fp32: seconds on a CPU")
    parser.set_defaults(reps=10, warmup=2)
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.d, args.vocab, args.reps, args.warmup = 2000, [64], 5000, 5, 1
    device = torch.device(args.device)
    args.precision = "bf16" if device.type == "cuda" and not args.smoke else "fp32"
    args.dtype = torch.bfloat16 if args.precision == "bf16" else None
    print(f"[loss_speed] {args.rows} x {args.d} x {args.vocab}, {args.precision}, {device}", file=sys.stderr)
    widths = [measure(d, args, device) for d in args.d]
    result = {"benchmark": "loss_speed", "device": args.device, **harness.machine(args.device), "padding": PADDING,
              **{k: getattr(args, k) for k in ("precision", "rows", "vocab", "reps", "warmup", "compile")},
              "widths": widths}
    harness.save(result, args.json, markdown(result))


if __name__ == "__main__":
    main()
