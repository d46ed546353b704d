"""Training speed three ways: the loop a run trains in (issues 34, 67), the model alone against its
peers at fixed shapes (issue 11), and this checkout against an earlier one (issue 34).

    python experiments/benchmarks/train_speed.py [--model base] [--tokens 25000] [--precision bf16-mixed]
        [--compile [BACKEND]] [--compile-mode MODE] [--packed] [--shape-grid K] [--pad-to-multiple N]
        [--vocab-multiple N] [--profile-steps N] [--peer hf] [--device cuda] [--steps 20] [--warmup 5]
    python experiments/benchmarks/train_speed.py --shape base recipe [--precision 32-true bf16-mixed] [--steps 8]
    python experiments/benchmarks/train_speed.py --shape recipe base --previous CLONE [--rounds 5] [--steps 6]

The loop: TranslationModule's training step and optimizer through lightning.Trainer.fit on
token-budget batches of random ids (synthetic.py), conf/model/<model>.yaml; --warmup steps untimed
(on a --shape-grid, until every shape has come), then --steps timed; tokens/s, MFU (a data-sheet or a
measured peak), memory, padding, each attention kind's kernel; --peer hf: HF Marian on the same
batches; --profile-steps: where the time goes (profiling.py). --shape: ours (output_layer_loss), HF
MarianMTModel and torch.nn.Transformer on one fixed batch, interleaved step by step. --previous:
ours in this checkout and in CLONE, a fresh process of each a round; the median step and first loss
of each (README.md says more).
"""

import argparse
import contextlib
import gc
import json
import logging
import math
import sys
import tempfile
import time
import warnings
from pathlib import Path

import harness
import torch
from fixed_shapes import (
    DTYPES,
    SHAPES,
    Shape,
    System,
    against_peers,
    against_previous,
    config_of,
    fixed_steps,
    matmul_peak,
)
from synthetic import placeholder_vocabularies, steps_to_cover, synthetic_pairs, token_budget_loader
from torch import nn


def progress(message: str) -> None:
    print(f"[train_speed] {message}", file=sys.stderr, flush=True)


class StepRecord:
    """The timed steps (`count` of them after `skip`): a timer each (CUDA events on a GPU), and each
    batch's rows (sentence pairs), slots (the tensors' sizes), tokens and source tokens."""

    def __init__(self, device: torch.device, skip: int, count: int) -> None:
        from transformer_mt.training.step_meter import timer_for

        self.device, self.skip, self.count, self.timer_for = device, skip, count, timer_for
        self.timers, self.batches, self.warmup_seconds, self.wall_seconds = [], [], 0.0, 0.0
        self.began = self.timed_from = 0.0

    def begin(self, step: int, batch: dict) -> None:
        self.began = time.perf_counter() if step == 0 else self.began
        if self.skip <= step < self.skip + self.count:
            if step == self.skip:  # warm-up (and compilation) done: one sync, then the timed steps
                harness.sync(self.device)
                self.timed_from = time.perf_counter()
                self.warmup_seconds = self.timed_from - self.began
            self.timers.append(self.timer_for(self.device))
            self.timers[-1].start()
            self.batches.append((len(batch["id"]), batch["src"].numel() + batch["tgt_in"].numel(),
                                 int(batch["num_tokens"]), int(batch["num_src_tokens"])))

    def end(self, step: int) -> None:
        if self.skip <= step < self.skip + self.count:
            self.timers[-1].stop()
            if step == self.skip + self.count - 1:
                self.finish()

    def finish(self) -> None:
        """The wall clock of the timed steps stops (once)."""
        if not self.wall_seconds:
            harness.sync(self.device)
            self.wall_seconds = time.perf_counter() - self.timed_from

    def figures(self, config, peak_flops: float) -> dict:
        """Throughput of the timed steps (device time), FLOP/s and MFU, padding, wall-clock rate."""
        from transformer_mt.model.flops import training_flops

        seconds, steps = sum(t.seconds() for t in self.timers), len(self.timers)
        tokens, src_tokens = sum(b[2] for b in self.batches), sum(b[3] for b in self.batches)
        flops = sum(training_flops(config, s, n - s, s / rows, (n - s) / rows) for rows, _, n, s in self.batches)
        slots = sum(b[1] for b in self.batches)
        return {"steps": steps, "target_tokens_per_s": (tokens - src_tokens) / seconds,
                "tokens_per_s": tokens / seconds, "step_ms": 1000 * seconds / steps,
                "step_ms_max": 1000 * max(t.seconds() for t in self.timers),  # a recompile shows here
                "tflops": flops / seconds / 1e12, "mfu": flops / seconds / peak_flops,
                "wall_tokens_per_s": tokens / self.wall_seconds, "padding": 1 - tokens / slots,
                "tokens_per_step": tokens / steps, "warmup_s": self.warmup_seconds}

    def callback(self):
        """A Lightning callback that times each training batch (start to end of its optimizer step)."""
        from lightning.pytorch.callbacks import Callback

        record = self

        class StepTimer(Callback):
            def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
                record.begin(trainer.global_step, batch)

            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
                record.end(trainer.global_step - 1)

            def on_train_end(self, trainer, pl_module) -> None:
                record.finish()

        return StepTimer()


def compose_run_config(args):
    """The run config of `python run.py model=<model> [module.compile=...] ...` (hydra compose)."""
    from hydra import compose, initialize_config_dir

    from transformer_mt.tasks.options import register

    register()  # as run.py does
    overrides = [f"model={args.model}", *([f"++module.compile={args.compile}"] if args.compile else []),
                 f"++module.shape_grid={args.shape_grid or 'null'}", f"++module.vocab_multiple={args.vocab_multiple}",
                 f"++module.compile_mode={args.compile_mode or 'null'}"]
    with initialize_config_dir(version_base="1.3", config_dir=str(harness.ROOT / "conf"), job_name="train_speed"):
        return compose(config_name="config", overrides=overrides)


def peak_flops_of(device: torch.device, precision: str) -> tuple[float, str]:
    """The GPU's data-sheet peak at this precision; else (a CPU, an unknown GPU) a matmul peak measured now."""
    from transformer_mt.training.step_meter import known_peak_flops

    peak = known_peak_flops(torch.cuda.get_device_name(device), precision) if device.type == "cuda" else None
    if peak:
        return peak, "data sheet"
    return matmul_peak(str(device), DTYPES[precision], n=2048 if device.type == "cuda" else 1024), "measured matmul"


def attention_report(args, model: nn.Module, batch: dict, device: torch.device) -> dict:
    """The SDPA call and backend of each attention kind on the first batch; packed: the kernel
    `packed_attention` runs (varlen or reference) and its arguments, as the padded report has them."""
    from transformer_mt.model.attention import MultiHeadAttention, uses_varlen_kernel
    from transformer_mt.model.sdpa_backends import attention_calls, backend_of, kind_of

    dtype = DTYPES[args.precision[0]]
    if not args.packed:
        calls = attention_calls(model, batch["src"].to(device), batch["tgt_in"].to(device), dtype)
        return {kind: {"backend": backend_of(call), **call.describe()} for kind, call in calls.items()}
    tokens = {"src": batch["packing"].src.segments.numel(), "tgt": batch["packing"].tgt.segments.numel()}
    streams, report = {"encoder_self": ("src", "src"), "decoder_self": ("tgt", "tgt"), "cross": ("tgt", "src")}, {}
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


def train_ours(args, cfg, table, device: torch.device, peak: float) -> tuple[dict, dict]:
    """TranslationModule through lightning.Trainer.fit: its figures (with --profile-steps, the
    profile), and the attention report of its first batch."""
    import lightning as L
    from hydra.utils import instantiate
    from lightning.pytorch.loggers import CSVLogger
    from profiling import profile_callback, profile_ranges
    from torch._dynamo.utils import counters  # the graphs torch.compile made: no public count of them

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
    attention = attention_report(args, module.model.to(device).train(), next(iter(loader)), device)
    record, profile, graphs = StepRecord(device, args.warmup, args.steps), {}, int(counters["stats"]["unique_graphs"])
    callbacks = [record.callback(), StepMeter(peak_flops=peak)]
    if args.profile_steps:
        callbacks.append(profile_callback(device, args.warmup + args.steps, args.profile_steps, profile))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with tempfile.TemporaryDirectory() as logs, profile_ranges() if args.profile_steps else contextlib.nullcontext():
        trainer = L.Trainer(accelerator="gpu" if device.type == "cuda" else "cpu", devices=1,
                            precision=args.precision[0], max_steps=args.warmup + args.steps + args.profile_steps,
                            max_epochs=-1, logger=CSVLogger(logs, name="csv", version=""),
                            log_every_n_steps=cfg.trainer.log_every_n_steps, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                            num_sanity_val_steps=0, use_distributed_sampler=False, callbacks=callbacks)
        progress(f"ours: {args.warmup} warm-up + {args.steps} timed + {args.profile_steps} profiled steps")
        trainer.fit(module, train_dataloaders=loader)
    figures = {"system": "ours", "compile": args.compile or False, "packed": args.packed,
               "shape_grid": args.shape_grid, "compile_mode": args.compile_mode, "warmup_steps": args.warmup,
               "grid_shapes": len(loader.batch_sampler.grid.lengths) if args.shape_grid else None,
               **record.figures(module.model.config, peak), "graphs": int(counters["stats"]["unique_graphs"]) - graphs,
               "peak_memory_gb": peak_memory_gb(device), "parameters": module.model.num_parameters(),
               **({"profile": profile} if args.profile_steps else {})}
    return figures, attention


def peak_memory_gb(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def train_hf(args, cfg, table, device: torch.device, peak: float) -> dict:
    """HF MarianMTModel of the same shape on the same batches: a plain loop, same optimizer,
    schedule, loss and autocast (with a gradient scaler under 16-mixed), our SDPA kernels."""
    from hydra.utils import instantiate

    from transformer_mt.model.attention import kernels

    torch.manual_seed(0)
    m, dtype = cfg.model, DTYPES[args.precision[0]]
    shape = Shape(m.d_model, m.d_ff, m.heads, m.num_encoder_layers)
    model = System("hf", shape, args.vocab, m.max_positions, m.dropout).to(device).train()
    optimizer = instantiate(cfg.optim.optimizer)(params=model.parameters())
    schedule = instantiate(cfg.optim.scheduler)(optimizer=optimizer)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    loader = token_budget_loader(table, args.tokens, args.pad_to_multiple, args.workers, device.type == "cuda")
    record = StepRecord(device, args.warmup, args.steps)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    progress(f"HF MarianMTModel: {args.warmup} warm-up + {args.steps} timed steps, plain loop")
    for step, batch in zip(range(args.warmup + args.steps), loader):
        record.begin(step, batch)
        src, tgt_in, tgt_out = (batch[k].to(device, non_blocking=True) for k in ("src", "tgt_in", "tgt_out"))
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None), kernels(device):
            loss_sum, _, ntokens = model.loss(src, tgt_in, tgt_out)
        scaler.scale(loss_sum / ntokens).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        schedule.step()
        record.end(step)
    record.finish()
    return {"system": "HF MarianMTModel", "compile": False, "packed": False,
            **record.figures(config_of(shape, args.vocab), peak), "peak_memory_gb": peak_memory_gb(device),
            "parameters": sum(p.numel() for p in model.parameters())}


def loop_markdown(result: dict) -> str:
    """The figures of one loop run as a Markdown table (and its profile's)."""
    from profiling import profile_markdown

    from transformer_mt.markdown import markdown_table

    lines = [f"model={result['model']} ({result['parameters'] / 1e6:.1f}M parameters), {result['max_tokens']} tokens "
             f"per batch, {result['precision']}, {harness.described(result)}; MFU against "
             f"{result['peak_tflops']:.3g} TFLOP/s ({result['peak_source']}); "
             + ", ".join(f"{kind}: {a['backend']}" for kind, a in result["attention"].items()), ""]
    rows = [[r["system"] + (f", {r['shape_grid']} shapes" if r.get("shape_grid") else ""),
             (r["compile"] or "no") + (f", {r['compile_mode']}" if r.get("compile_mode") else ""),
             "yes" if r["packed"] else "no", f"{r['target_tokens_per_s']:,.0f}", f"{r['tokens_per_s']:,.0f}",
             f"{r['step_ms']:.1f}", f"{r['tflops']:.2f}", f"{r['mfu']:.1%}",
             "-" if r["peak_memory_gb"] is None else f"{r['peak_memory_gb']:.1f}", f"{r['padding']:.1%}",
             f"{r['warmup_s']:.1f}"] for r in result["systems"]]
    columns = ["system", "compile", "packed", "target tokens/s", "src+tgt tokens/s", "step ms", "TFLOP/s", "MFU",
               "peak GPU GB", "padding", "warm-up s"]
    profile = result["systems"][0].get("profile")
    return "\n".join([*lines, markdown_table(columns, rows, right=range(3, 11)),
                      *(["", profile_markdown(profile)] if profile else [])])


def loop(args) -> None:
    """The training loop (ours, then --peer hf): its figures printed, and written with --json."""
    device = torch.device(args.device)
    args.workers = args.workers if args.workers is not None else (4 if device.type == "cuda" else 0)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # no accelerator banners
    for message in (".*does not have many workers.*", ".*(LeafSpec|isinstance.*treespec).*", ".*no `val_dataloader`.*"):
        warnings.filterwarnings("ignore", message=message)
    cfg = compose_run_config(args)
    mean = 25 * math.exp(0.6**2 / 2) + 1  # mean padded size of a pair
    sentences = int(1.3 * (args.warmup + args.steps + args.profile_steps) * args.tokens / mean) + 1000  # an epoch
    progress(f"{sentences:,} random sentence pairs, model={args.model}, {args.device}, {args.precision[0]}")
    table = synthetic_pairs(sentences, args.vocab)
    peak, peak_source = peak_flops_of(device, args.precision[0])
    ours, attention = train_ours(args, cfg, table, device, peak)
    systems = [ours]
    if args.peer == "hf":
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        systems.append(train_hf(args, cfg, table, device, peak))
    result = {"benchmark": "loop_speed", "model": args.model, "parameters": ours["parameters"], "vocab": args.vocab,
              "max_tokens": args.tokens, "precision": args.precision[0], "compile": args.compile or False,
              "pad_to_multiple": args.pad_to_multiple, "packed": args.packed, "shape_grid": args.shape_grid,
              "compile_mode": args.compile_mode, "vocab_multiple": args.vocab_multiple, "warmup_steps": args.warmup,
              "timed_steps": args.steps, "profile_steps": args.profile_steps, "device": args.device,
              **harness.machine(args.device), "peak_tflops": peak / 1e12, "peak_source": peak_source,
              "attention": attention, "systems": systems}
    harness.emit(result, loop_markdown(result), args.json)


def arguments() -> argparse.Namespace:
    parser = harness.parser(__doc__, device="cuda" if torch.cuda.is_available() else "cpu")
    add = parser.add_argument
    add("--precision", nargs="+", default=["32-true"], choices=sorted(DTYPES), help="the loop's (its first); --shape's")
    add("--steps", type=int, help="timed steps (default: the loop 20, --shape 8, --previous 6)")
    add("--warmup", type=int, default=5, help="the loop's untimed steps first (they absorb compilation)")
    add("--model", default="base", choices=["tiny", "small", "base", "big"])
    add("--tokens", type=int, default=25_000, help="max padded tokens per batch")
    add("--compile", nargs="?", const="inductor", metavar="BACKEND", help="module.compile=BACKEND (default inductor)")
    add("--compile-mode", default=None, help="module.compile_mode (reduce-overhead: CUDA graphs)")
    add("--packed", action="store_true", help="ours on packed batches (data.packed=true)")
    add("--shape-grid", type=int, default=None, help="ours on batches of at most K shapes (data.shape_grid)")
    add("--pad-to-multiple", type=int, default=1, help="data.pad_to_multiple")
    add("--vocab-multiple", type=int, default=1, help="module.vocab_multiple")
    add("--profile-steps", type=int, default=0, help="then N steps of ours under torch.profiler")
    add("--workers", type=int, default=None, help="DataLoader workers (default: 4 on cuda, 0 on cpu)")
    add("--vocab", type=int, default=37_000)
    add("--peer", choices=["hf"], help="also HF MarianMTModel on the same batches")
    add("--shape", nargs="+", choices=sorted(SHAPES), help="the model alone at these shapes")
    add("--previous", type=Path, help="a clone at an earlier commit: --shape in both checkouts")
    add("--rounds", type=int, default=5, help="--previous: a fresh process of each checkout a round")
    add("--threads", type=int, help="--previous: OMP_NUM_THREADS of the processes")
    add("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.child:  # one checkout's process of --previous: ours at one shape, fp32 on the CPU
        torch.manual_seed(0)
        shape = SHAPES[args.shape[0]]
        print(json.dumps(fixed_steps({"ours": System("ours", shape)}, shape, args.steps, "cpu", None)["ours"]))
    elif args.shape:
        args.steps = args.steps or (6 if args.previous else 8)
        result = against_previous(args) if args.previous else against_peers(args)
        if args.json:
            args.json.write_text(json.dumps(result, indent=1) + "\n")
    else:
        args.steps = args.steps or 20
        loop(args)


if __name__ == "__main__":
    main()
