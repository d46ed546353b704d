"""The training step (README.md): the loop a run trains in (--peer hf: HF Marian on the same batches;
--profile-steps: profiling.py); --shape, --previous CLONE: fixed_shapes.py; --dashboards: what they cost."""

import argparse
import contextlib
import gc
import logging
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import harness
import lightning as L
import torch
from fixed_shapes import DTYPES, SHAPES, Shape, System, against_peers, against_previous, config_of, matmul_peak
from harness import BOS, EOS, PAD, synthetic_pairs
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger
from omegaconf import open_dict
from profiling import profile_callback, profile_markdown, profile_ranges
from tokenizers import Tokenizer, models
from torch import nn
from torch._dynamo.utils import counters  # the graphs torch.compile made: no public count of them
from torch.utils.data import DataLoader

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset
from transformer_mt.data.tokenizer import SPECIAL_TOKENS, UNK, BpeTokenizer, Vocabularies
from transformer_mt.markdown import markdown_table
from transformer_mt.model.attention import MultiHeadAttention, kernels, uses_varlen_kernel
from transformer_mt.model.flops import training_flops
from transformer_mt.model.sdpa_backends import attention_calls, backend_of, kind_of
from transformer_mt.tasks import train
from transformer_mt.tasks.options import register
from transformer_mt.tasks.runs.start import architecture
from transformer_mt.training.curves import LearningCurves
from transformer_mt.training.dashboard import TranslationDashboard
from transformer_mt.training.step_meter import StepMeter, known_peak_flops, timer_for


def placeholder_vocabularies(size: int):
    """A vocabulary of `size` placeholder tokens after the specials: the module takes its size from it."""
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    vocab.update({f"t{i}": i for i in range(len(SPECIAL_TOKENS), size)})
    return Vocabularies(BpeTokenizer(Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))))


def token_budget_loader(table, max_tokens: int, pad_to_multiple: int, workers: int, pin: bool, packed: bool = False,
                        shape_grid: int | None = None):
    """The datamodule's training batches (seed 0); packed: data.packed's; shape_grid: data.shape_grid's."""
    dataset = TranslationDataset(table)
    padding = {"pad_to_multiple": pad_to_multiple} if pad_to_multiple > 1 else {}
    sampler = TokenBudgetBatchSampler(dataset.sizes(), max_tokens, shuffle=True, seed=0, shape_grid=shape_grid,
                                      **padding)
    collate = Collator(PAD, BOS, EOS, packed=packed, grid=sampler.grid, **padding)
    return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=workers,
                      persistent_workers=workers > 0, pin_memory=pin)


def steps_to_cover(loader) -> int:
    """How many batches of `loader` (on a shape grid) come before every shape has come once."""
    sampler, seen = loader.batch_sampler, set()
    for steps, batch in enumerate(sampler.all_batches(), 1):
        seen.add(sampler.grid.shape(int(sampler.sizes[batch].max())))
        if len(seen) == len(sampler.grid.lengths):
            return steps
    return len(sampler.all_batches())


def progress(message: str) -> None:
    print(f"[train_speed] {message}", file=sys.stderr, flush=True)


class StepRecord(Callback):
    """The timed steps (`count` after `skip`): a timer each, each batch's rows, slots, tokens, source tokens; the
    peak GPU memory from its making."""

    def __init__(self, device: torch.device, skip: int, count: int) -> None:
        self.device, self.skip, self.count = device, skip, count
        self.timers, self.batches, self.began, self.warmup_seconds = [], [], 0.0, 0.0
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    def begin(self, step: int, batch: dict) -> None:
        self.began = time.perf_counter() if step == 0 else self.began
        if step == self.skip:  # warm-up (and compilation) done
            harness.sync(self.device)
            self.warmup_seconds = time.perf_counter() - self.began
        if self.skip <= step < self.skip + self.count:
            self.timers.append(timer_for(self.device))
            self.timers[-1].start()
            self.batches.append((len(batch["id"]), batch["src"].numel() + batch["tgt_in"].numel(),
                                 int(batch["num_tokens"]), int(batch["num_src_tokens"])))

    def end(self, step: int) -> None:
        if self.skip <= step < self.skip + self.count:
            self.timers[-1].stop()

    def figures(self, config, peak_flops: float) -> dict:
        seconds, steps = sum(t.seconds() for t in self.timers), len(self.timers)
        tokens, src_tokens = sum(b[2] for b in self.batches), sum(b[3] for b in self.batches)
        flops = sum(training_flops(config, s, n - s, s / rows, (n - s) / rows) for rows, _, n, s in self.batches)
        return {"steps": steps, "target_tokens_per_s": (tokens - src_tokens) / seconds,
                "tokens_per_s": tokens / seconds, "step_ms": 1000 * seconds / steps,
                "step_ms_max": 1000 * max(t.seconds() for t in self.timers),  # a recompile shows here
                "tflops": flops / seconds / 1e12, "mfu": flops / seconds / peak_flops,
                "padding": 1 - tokens / sum(b[1] for b in self.batches), "warmup_s": self.warmup_seconds,
                "peak_memory_gb": torch.cuda.max_memory_allocated() / 2**30 if self.device.type == "cuda" else None}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.begin(trainer.global_step, batch)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.end(trainer.global_step - 1)


def compose_run_config(overrides: list[str], hydra: bool = False):
    GlobalHydra.instance().clear()
    register()  # as run.py does
    with initialize_config_dir(version_base="1.3", config_dir=str(harness.ROOT / "conf"), job_name="train_speed"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=hydra)


def attention_report(args, model: nn.Module, batch: dict, device: torch.device) -> dict:
    """Each attention kind's SDPA call and backend on the first batch (packed: varlen or reference)."""
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
    """TranslationModule through lightning.Trainer.fit: its figures, the first batch's attention report."""
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
    callbacks = [record, StepMeter(peak_flops=peak)]
    if args.profile_steps:
        callbacks.append(profile_callback(device, args.warmup + args.steps, args.profile_steps, profile))
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
               "parameters": module.model.num_parameters(),
               **({"profile": profile} if args.profile_steps else {})}
    return figures, attention


def train_hf(args, cfg, table, device: torch.device, peak: float) -> dict:
    """HF Marian on the same batches: a plain loop, the same optimizer, schedule, loss and autocast."""
    torch.manual_seed(0)
    m, dtype = cfg.model, DTYPES[args.precision[0]]
    shape = Shape(m.d_model, m.d_ff, m.heads, m.num_encoder_layers)
    model = System("hf", shape, args.vocab, m.max_positions, m.dropout).to(device).train()
    optimizer = instantiate(cfg.optim.optimizer)(params=model.parameters())
    schedule = instantiate(cfg.optim.scheduler)(optimizer=optimizer)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    loader = token_budget_loader(table, args.tokens, args.pad_to_multiple, args.workers, device.type == "cuda")
    record = StepRecord(device, args.warmup, args.steps)
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
    return {"system": "HF MarianMTModel", "compile": False, "packed": False, **record.figures(
        config_of(shape, args.vocab), peak), "parameters": sum(p.numel() for p in model.parameters())}


def loop_markdown(result: dict) -> str:
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
    device = torch.device(args.device)
    args.workers = 4 if device.type == "cuda" else 0  # DataLoader workers
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # no accelerator banners
    for message in (".*does not have many workers.*", ".*(LeafSpec|isinstance.*treespec).*", ".*no `val_dataloader`.*"):
        warnings.filterwarnings("ignore", message=message)
    cfg = compose_run_config([f"model={args.model}", *([f"++module.compile={args.compile}"] if args.compile else []),
                              f"++module.shape_grid={args.shape_grid or 'null'}",
                              f"++module.vocab_multiple={args.vocab_multiple}",
                              f"++module.compile_mode={args.compile_mode or 'null'}"])
    mean = 25 * math.exp(0.6**2 / 2) + 1  # mean padded size of a pair
    sentences = int(1.3 * (args.warmup + args.steps + args.profile_steps) * args.tokens / mean) + 1000  # an epoch
    progress(f"{sentences:,} random sentence pairs, model={args.model}, {args.device}, {args.precision[0]}")
    table = synthetic_pairs(sentences, args.vocab)
    # the GPU's data-sheet peak at this precision; else (a CPU, an unknown GPU) a matmul peak measured now
    peak = known_peak_flops(torch.cuda.get_device_name(device), args.precision[0]) if device.type == "cuda" else None
    peak, peak_source = (peak, "data sheet") if peak else (matmul_peak(
        args.device, DTYPES[args.precision[0]], n=2048 if device.type == "cuda" else 1024), "measured matmul")
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
    harness.save(result, args.json, loop_markdown(result))


class ValidationClock(Callback):
    """Sums the wall time of the validation loops (listed last, so its end includes the others' hooks)."""

    last: "ValidationClock | None" = None  # the one the latest run built (Hydra instantiates it)

    def __init__(self) -> None:
        self.seconds, self._start, self.callbacks = 0.0, 0.0, []
        ValidationClock.last = self

    def on_fit_start(self, trainer, pl_module) -> None:
        self.callbacks = list(trainer.callbacks)

    def on_validation_start(self, trainer, pl_module) -> None:
        self._start = time.perf_counter()

    def on_validation_end(self, trainer, pl_module) -> None:
        self.seconds += time.perf_counter() - self._start


def dashboard_run(output_dir: Path, overrides: list[str]) -> dict:
    """Train once (composed as run.py composes); the fit and validation times and the dashboard callbacks' own."""
    cfg = compose_run_config([*overrides, "+callbacks.validation_clock._target_=__main__.ValidationClock"], True)
    with open_dict(cfg):
        cfg.paths.output_dir = cfg.hydra.runtime.output_dir = str(output_dir)
        cfg.hydra.job.num = 0
    HydraConfig().set_config(cfg)
    started = time.perf_counter()
    metrics = train.run(cfg)
    clock = ValidationClock.last
    dashboard = next((c for c in clock.callbacks if isinstance(c, TranslationDashboard)), None)
    curves = next((c for c in clock.callbacks if isinstance(c, LearningCurves)), None)
    return {"total": time.perf_counter() - started, "train": metrics["train_seconds"], "validate": clock.seconds,
            "validations": len(dashboard.seconds) if dashboard else None, "steps": metrics["steps"],
            "dashboard": dashboard.seconds if dashboard else [], "curves": curves.seconds if curves else []}


def dashboards(overrides: list[str]) -> None:
    for name, value in (("PROJECT_ROOT", str(harness.ROOT)), ("WANDB_MODE", "offline"), ("WANDB_SILENT", "true")):
        os.environ.setdefault(name, value)
    with tempfile.TemporaryDirectory() as tmp:
        on = dashboard_run(Path(tmp) / "on", ["logger=many", *overrides])
        off = dashboard_run(Path(tmp) / "off", ["logger=csv", "~callbacks.dashboard", "~callbacks.learning_curves",
                                                *overrides])
    n, dash, curves = on["validations"], sum(on["dashboard"]), sum(on["curves"])
    print(f"overrides: {' '.join(overrides) or '(none: the toy default job)'}; {on['steps']} steps, {n} validations; "
          f"{harness.described(harness.machine())}")
    names = (("train", "fit (train + validation), s"), ("validate", "validation loops (with their callbacks), s"),
             ("total", "whole run incl. test, s"))
    rows = [[name, f"{on[key]:.1f}", f"{off[key]:.1f}", f"{on[key] / off[key]:.3f}"] for key, name in names]
    print(markdown_table(["", "with dashboards", "without", "ratio"], rows, right=(1, 2, 3)))
    print(f"\ntables + heatmaps per validation: {dash / n:.3f} s; curves per write: "
          f"{curves / max(len(on['curves']), 1):.3f} s ({len(on['curves'])} writes)")
    print(f"callbacks' own time / fit time (with dashboards): {(dash + curves) / on['train']:.3%}")


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
    add("--vocab", type=int, default=37_000)
    add("--peer", choices=["hf"], help="also HF MarianMTModel on the same batches")
    add("--shape", nargs="+", choices=sorted(SHAPES), help="the model alone at these shapes")
    add("--previous", type=Path, help="a clone at an earlier commit: --shape in both checkouts")
    add("--rounds", type=int, default=5, help="--previous: a fresh process of each checkout a round")
    add("--dashboards", action="store_true", help="what the dashboards cost (OVERRIDEs: the run's; none: the toy job)")
    add("overrides", nargs="*", help="--dashboards: the run's overrides")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.dashboards:
        dashboards(args.overrides)
    elif args.shape:
        args.steps = args.steps or (6 if args.previous else 8)
        harness.save(against_previous(args) if args.previous else against_peers(args), args.json)
    else:
        args.steps = args.steps or 20
        loop(args)


if __name__ == "__main__":
    main()
