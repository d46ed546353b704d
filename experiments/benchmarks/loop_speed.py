"""The training loop's speed: what a training run does, step for step, timed and profiled.

    python experiments/benchmarks/loop_speed.py [--model tiny|small|base|big] [--tokens 25000]
        [--precision 32-true|bf16-mixed|16-mixed] [--compile [BACKEND]] [--device cpu|cuda] [--steps 20]
        [--warmup 5] [--pad-to-multiple 1] [--packed] [--shape-grid K] [--compile-mode MODE]
        [--vocab-multiple N] [--profile-steps N] [--workers N] [--peer hf] [--json PATH]

TranslationModule's training step (loss, the NaN guard, logging, StepMeter) and its optimizer
+ schedule (conf/optim/noam.yaml), through lightning.Trainer.fit (CSV logger, no checkpoints, no
validation), on token-budget batches (TokenBudgetBatchSampler + Collator, as the datamodule makes
them) of random ids from a 37k vocabulary, with sentence lengths drawn from a lognormal (median 25
tokens, at most 250; the target's correlated with the source's: synthetic.py). The model is
conf/model/<model>.yaml. --warmup steps (which also absorb compilation) are not timed; the next
--steps are, each with CUDA events on a GPU (read at the end) or the host clock on a CPU. Prints
target and source + target tokens/s, the step time, model TFLOP/s and MFU (against the GPU's
data-sheet peak, training.step_meter.PEAK_FLOPS; on a CPU against a matmul peak measured in the same
run), peak GPU memory, and which SDPA backend each kind of attention gets on the first batch
(sdpa_backends.py). --peer hf: HF MarianMTModel of the same shape on the same batches, in a plain
loop (same optimizer, schedule and autocast; on a GPU the same SDPA kernels as ours,
`attention.CUDA_BACKENDS`: no cuDNN).

--packed: ours trains on packed batches (data.packed: the same sentences end to end, no padding;
attention per sentence, `packed_attention`), and the attention report names the kernel each kind
runs (varlen: torch's variable-length kernel, or reference: unpack, SDPA, pack back); the HF peer
keeps the padded batches. Rows are sentence pairs (`len(batch["id"])`), slots the tensors' sizes
(src + tgt_in: no padding when packed).

--profile-steps N: after the timed steps, N more steps of ours under torch.profiler, and where their
time went (profiling.py): matmul, attention, loss (the output layer + loss: `output_layer_loss`,
wrapped in a `record_function("loss")` range), elementwise (every other op: pointwise, norms,
reductions, casts, embeddings), optimizer (inside torch's Optimizer.step range, less the forward and
backward that Lightning runs inside it at 32-true), other (copies, memsets, engine overhead) and
idle. On a GPU: CUDA kernel time, and idle = wall time - the time some kernel ran; on a CPU: CPU op
self time, and idle = wall time - the ops' time (Python, Lightning, data loading).

--shape-grid K: ours on data.shape_grid's batches (at most K shapes; with --compile the regions on
static shapes, module.shape_grid), the warm-up lengthened to the step where the last shape first
comes, so that the timed steps compile nothing: "warm-up s" is then what capturing every shape
cost. --compile-mode: module.compile_mode (reduce-overhead: CUDA graphs). --vocab-multiple:
module.vocab_multiple (the output layer + loss over the vocabulary padded to a multiple of it).

The model-only comparison against HF and torch.nn.Transformer at fixed shapes: train_speed.py.
"""

import argparse
import contextlib
import gc
import logging
import math
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from output import emit, machine
from peer_models import HFMarian, Shape
from profiling import profile_callback, profile_markdown, profile_ranges
from sdpa_backends import attention_calls, backend_of, kind_of
from step_timing import StepRecord, lightning_timer, matmul_peak
from synthetic import PAD, placeholder_vocabularies, steps_to_cover, synthetic_pairs, token_budget_loader
from torch import nn

from transformer_mt.markdown import markdown_table
from transformer_mt.model import TransformerConfig
from transformer_mt.model.attention import kernels

ROOT = Path(__file__).resolve().parents[2]

LOOP_VOCAB = 37_000
PRECISION_DTYPES = {"32-true": None, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


def progress(message: str) -> None:
    print(f"[loop_speed] {message}", file=sys.stderr, flush=True)


def compose_run_config(model: str, compile_: str | None, extra: list[str] = ()):
    """The run config of `python run.py model=<model> [module.compile=<backend>] [EXTRA]` (hydra compose)."""
    from hydra import compose, initialize_config_dir

    from transformer_mt.schema.store import register

    register()  # as run.py does
    overrides = [f"model={model}", *([f"++module.compile={compile_}"] if compile_ else []), *extra]
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf"), job_name="loop_speed"):
        return compose(config_name="config", overrides=overrides)


def peak_memory_gb(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def peak_flops_of(device: torch.device, precision: str) -> tuple[float, str]:
    """The GPU's data-sheet peak at this precision; else (a CPU, an unknown GPU) a matmul peak measured now."""
    from transformer_mt.training.step_meter import known_peak_flops

    if device.type == "cuda":
        peak = known_peak_flops(torch.cuda.get_device_name(device), precision)
        if peak:
            return peak, "data sheet"
    dtype = PRECISION_DTYPES[precision] or torch.float32
    n = 2048 if device.type == "cuda" else 1024
    return matmul_peak(str(device), dtype, n=n), "measured matmul"


def packed_attention_report(model: nn.Module, batch: dict, dtype: torch.dtype | None) -> dict:
    """For a packed batch: the kernel `packed_attention` runs for each attention kind of `model`
    (varlen or reference, `uses_varlen_kernel`) and its arguments, as the padded report has them."""
    from transformer_mt.model.attention import MultiHeadAttention, uses_varlen_kernel

    device = next(model.parameters()).device
    tokens = {"src": batch["packing"].src.segments.numel(), "tgt": batch["packing"].tgt.segments.numel()}
    streams = {"encoder_self": ("src", "src"), "decoder_self": ("tgt", "tgt"), "cross": ("tgt", "src")}
    report = {}
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention) and kind_of(name, module) not in report:
            kind, dropout = kind_of(name, module), module.dropout if model.training else 0.0
            q = torch.empty(0, device=device, dtype=dtype or torch.float32)  # q's dtype under the autocast
            (queries, keys), heads = streams[kind], [module.heads, module.d_k]
            report[kind] = {"backend": "varlen" if uses_varlen_kernel(q, dropout) else "reference",
                            "q": [tokens[queries], *heads], "k": [tokens[keys], *heads],
                            "dtype": str(q.dtype).removeprefix("torch."), "mask": None,
                            "is_causal": kind == "decoder_self", "dropout_p": dropout}
    return report


def compiled_graphs() -> int:
    """Graphs torch.compile has made in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def attention_report(args, model: nn.Module, first: dict, device: torch.device) -> dict:
    """The SDPA call and backend (packed: the kernel) of each attention kind on the first batch."""
    if args.packed:
        return packed_attention_report(model, first, PRECISION_DTYPES[args.precision])
    dtype = PRECISION_DTYPES[args.precision]
    calls = attention_calls(model, first["src"].to(device), first["tgt_in"].to(device), dtype)
    return {kind: {"backend": backend_of(call), **call.describe()} for kind, call in calls.items()}


def train_ours(args, cfg, table, device: torch.device, peak: float) -> tuple[dict, dict]:
    """TranslationModule through lightning.Trainer.fit: its figures (with --profile-steps, the
    profile), and the SDPA call and backend (packed: the kernel) of each attention kind on the
    first batch."""
    import lightning as L
    from hydra.utils import instantiate
    from lightning.pytorch.loggers import CSVLogger

    from transformer_mt.tasks.runs.start import architecture
    from transformer_mt.training.step_meter import StepMeter

    L.seed_everything(0, verbose=False)
    make = instantiate(cfg.module, _partial_=True, _recursive_=False)
    module = make(model=architecture(cfg.model), tokenizer=placeholder_vocabularies(args.vocab).to_dict())
    loader = token_budget_loader(table, args.tokens, args.pad_to_multiple, args.workers, device.type == "cuda",
                                 args.packed, args.shape_grid)
    if args.shape_grid:  # every shape comes in the warm-up: the timed steps compile nothing
        args.warmup = max(args.warmup, steps_to_cover(loader))
        progress(f"{len(loader.batch_sampler.grid.lengths)} shapes (rows x length): {loader.batch_sampler.grid}")
    model = module.model.to(device).train()
    attention = attention_report(args, model, next(iter(loader)), device)
    record, profile = StepRecord(device, args.warmup, args.steps), {}
    callbacks = [lightning_timer(record), StepMeter(peak_flops=peak)]
    if args.profile_steps:
        callbacks.append(profile_callback(device, args.warmup + args.steps, args.profile_steps, profile))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    graphs = compiled_graphs()
    with tempfile.TemporaryDirectory() as logs, profile_ranges() if args.profile_steps else contextlib.nullcontext():
        trainer = L.Trainer(accelerator="gpu" if device.type == "cuda" else "cpu", devices=1,
                            precision=args.precision, max_steps=args.warmup + args.steps + args.profile_steps,
                            max_epochs=-1, logger=CSVLogger(logs, name="csv", version=""),
                            log_every_n_steps=cfg.trainer.log_every_n_steps,
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            limit_val_batches=0, num_sanity_val_steps=0, use_distributed_sampler=False,
                            callbacks=callbacks)
        progress(f"ours: {args.warmup} warm-up + {args.steps} timed + {args.profile_steps} profiled steps through "
                 f"lightning.Trainer.fit{', packed batches' if args.packed else ''}")
        trainer.fit(module, train_dataloaders=loader)
    figures = {"system": "ours", "compile": args.compile or False, "packed": args.packed,
               "shape_grid": args.shape_grid, "compile_mode": args.compile_mode, "warmup_steps": args.warmup,
               "grid_shapes": len(loader.batch_sampler.grid.lengths) if args.shape_grid else None,
               **record.figures(module.model.config, peak), "graphs": compiled_graphs() - graphs,
               "peak_memory_gb": peak_memory_gb(device), "parameters": module.model.num_parameters(),
               **({"profile": profile} if args.profile_steps else {})}
    return figures, attention


def train_hf(args, cfg, table, device: torch.device, peak: float) -> dict:
    """HF MarianMTModel of the same shape on the same batches: a plain loop, same optimizer,
    schedule, loss and autocast (with a gradient scaler under 16-mixed)."""
    from hydra.utils import instantiate

    torch.manual_seed(0)
    m = cfg.model
    shape = Shape(m.d_model, m.d_ff, m.heads, m.num_encoder_layers, 0, 0)
    model = HFMarian(shape, args.vocab, m.max_positions, m.dropout).to(device).train()
    optimizer = instantiate(cfg.optim.optimizer)(params=model.parameters())
    schedule = instantiate(cfg.optim.scheduler)(optimizer=optimizer)
    dtype = PRECISION_DTYPES[args.precision]
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    loader = token_budget_loader(table, args.tokens, args.pad_to_multiple, args.workers, device.type == "cuda")
    record = StepRecord(device, args.warmup, args.steps)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    progress(f"HF MarianMTModel: {args.warmup} warm-up + {args.steps} timed steps, plain loop")
    for step, batch in enumerate(loader):
        if step == args.warmup + args.steps:
            break
        record.begin(step, batch)
        src, tgt_in, tgt_out = (batch[k].to(device, non_blocking=True) for k in ("src", "tgt_in", "tgt_out"))
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None), kernels(device):  # as ours
            loss_sum, _, ntokens = model.loss(src, tgt_in, tgt_out)
        scaler.scale(loss_sum / ntokens).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        schedule.step()
        record.end(step)
    record.finish()
    config = TransformerConfig(src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, pad_id=PAD,
                               num_encoder_layers=m.num_encoder_layers, num_decoder_layers=m.num_decoder_layers,
                               d_model=m.d_model, d_ff=m.d_ff, heads=m.heads)
    return {"system": "HF MarianMTModel", "compile": False, "packed": False, **record.figures(config, peak),
            "peak_memory_gb": peak_memory_gb(device), "parameters": sum(p.numel() for p in model.parameters())}


def markdown(result: dict) -> str:
    """The figures of one run as a Markdown table."""
    lines = [f"model={result['model']} ({result['parameters'] / 1e6:.1f}M parameters), {result['max_tokens']} tokens "
             f"per batch, {result['precision']}, {result['device_name']}, torch {result['torch']}; MFU against "
             f"{result['peak_tflops']:.3g} TFLOP/s ({result['peak_source']}); "
             + ", ".join(f"{kind}: {a['backend']}" for kind, a in result["attention"].items()), ""]
    rows = [[r["system"] + (f", {r['shape_grid']} shapes" if r.get("shape_grid") else ""),
             (r["compile"] or "no") + (f", {r['compile_mode']}" if r.get("compile_mode") else ""),
             "yes" if r["packed"] else "no", f"{r['target_tokens_per_s']:,.0f}",
             f"{r['tokens_per_s']:,.0f}", f"{r['step_ms']:.1f}", f"{r['tflops']:.2f}", f"{r['mfu']:.1%}",
             "-" if r["peak_memory_gb"] is None else f"{r['peak_memory_gb']:.1f}", f"{r['padding']:.1%}",
             f"{r['warmup_s']:.1f}"] for r in result["systems"]]
    columns = ["system", "compile", "packed", "target tokens/s", "src+tgt tokens/s", "step ms", "TFLOP/s", "MFU",
               "peak GPU GB", "padding", "warm-up s"]
    lines.append(markdown_table(columns, rows, right=range(3, 11)))
    profile = result["systems"][0].get("profile")
    return "\n".join(lines + (["", profile_markdown(profile)] if profile else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="base", choices=["tiny", "small", "base", "big"])
    parser.add_argument("--tokens", type=int, default=25_000, help="max padded tokens per batch")
    parser.add_argument("--precision", default="32-true", choices=sorted(PRECISION_DTYPES))
    parser.add_argument("--compile", nargs="?", const="inductor", metavar="BACKEND",
                        help="module.compile=BACKEND (default inductor; aot_eager: the graphs without code generation)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (they absorb compilation)")
    parser.add_argument("--pad-to-multiple", type=int, default=1, help="batch lengths padded to a multiple of it")
    parser.add_argument("--packed", action="store_true", help="ours on packed batches (data.packed=true)")
    parser.add_argument("--shape-grid", type=int, default=None, help="ours on batches of at most K shapes")
    parser.add_argument("--compile-mode", default=None, help="module.compile_mode (reduce-overhead: CUDA graphs)")
    parser.add_argument("--vocab-multiple", type=int, default=1, help="module.vocab_multiple")
    parser.add_argument("--profile-steps", type=int, default=0, help="then N steps of ours under torch.profiler")
    parser.add_argument("--workers", type=int, default=None, help="DataLoader workers (default: 4 on cuda, 0 on cpu)")
    parser.add_argument("--vocab", type=int, default=LOOP_VOCAB)
    parser.add_argument("--peer", choices=["hf"], help="also HF MarianMTModel on the same batches")
    parser.add_argument("--json", type=Path, help="write every figure here as JSON")
    args = parser.parse_args()
    device = torch.device(args.device)
    args.workers = args.workers if args.workers is not None else (4 if device.type == "cuda" else 0)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # no accelerator banners
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*(LeafSpec|isinstance.*treespec).*")
    warnings.filterwarnings("ignore", message=".*no `val_dataloader`.*")
    extra = [f"++module.shape_grid={args.shape_grid or 'null'}", f"++module.vocab_multiple={args.vocab_multiple}",
             f"++module.compile_mode={args.compile_mode or 'null'}"]
    cfg = compose_run_config(args.model, args.compile, extra)
    mean = 25 * math.exp(0.6**2 / 2) + 1  # mean padded size of a pair
    sentences = int(1.3 * (args.warmup + args.steps + args.profile_steps) * args.tokens / mean) + 1000  # an epoch
    progress(f"{sentences:,} random sentence pairs, model={args.model}, {args.device}, {args.precision}")
    table = synthetic_pairs(sentences, args.vocab)
    peak, peak_source = peak_flops_of(device, args.precision)
    ours, attention = train_ours(args, cfg, table, device, peak)
    systems = [ours]
    if args.peer == "hf":
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        systems.append(train_hf(args, cfg, table, device, peak))
    result = {"benchmark": "loop_speed", "model": args.model, "parameters": ours["parameters"],
              "vocab": args.vocab, "max_tokens": args.tokens, "precision": args.precision,
              "compile": args.compile or False, "pad_to_multiple": args.pad_to_multiple, "packed": args.packed,
              "shape_grid": args.shape_grid, "compile_mode": args.compile_mode, "vocab_multiple": args.vocab_multiple,
              "warmup_steps": args.warmup, "timed_steps": args.steps, "profile_steps": args.profile_steps,
              "device": args.device, **machine(device), "peak_tflops": peak / 1e12,
              "peak_source": peak_source, "attention": attention, "systems": systems}
    emit(result, markdown(result), args.json)


if __name__ == "__main__":
    main()
