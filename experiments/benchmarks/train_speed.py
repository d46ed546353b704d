"""Training speed of our Transformer against Hugging Face's MarianMTModel and torch.nn.Transformer
at the same dimensions and batches, in one run (systems interleaved step by step, each first in turn).

    python experiments/benchmarks/train_speed.py [--device cpu|cuda] [--precision fp32 bf16] [--steps 8]
        [--shape base|recipe]

--shape base (default): the paper's base model (d_model 512, d_ff 2048, 8 heads, 6 + 6 layers),
batches of 64 sentence pairs of 24 + 24 tokens; --shape recipe: experiment=multi30k_recipe's
model (d_model 128, d_ff 256, 4 heads, 4 + 4 layers), batches of 256 pairs of 16 + 16 tokens.
Both: ReLU, post-norm, tied embeddings, a 10k vocabulary, random ids (no padding), label-smoothed
loss (the peers: our `label_smoothed_nll_loss` on their logits; ours: its training path,
`output_layer_loss`, which applies the output layer chunk by chunk), fused Adam. Prints target
tokens/s, the ratio of ours to each peer, and model FLOPs utilization: our FLOPs estimate
(transformer_mt.model.flops) over a matmul peak measured in the same run.

    python experiments/benchmarks/train_speed.py --loop [--model tiny|small|base|big] [--tokens 25000]
        [--precision 32-true|bf16-mixed|16-mixed] [--compile [BACKEND]] [--device cpu|cuda] [--steps 20]
        [--warmup 5] [--pad-to-multiple 1] [--packed] [--profile-steps N] [--workers N] [--peer hf]
        [--json PATH]

--loop: what a training run does, step for step: TranslationModule's training step (loss, the
NaN guard, logging, TrainingHealth) and its optimizer + schedule (conf/optim/noam.yaml), through
lightning.Trainer.fit (CSV logger, no checkpoints, no validation), on token-budget batches
(TokenBudgetBatchSampler + Collator, as the datamodule makes them) of random ids from a 37k
vocabulary, with sentence lengths drawn from a lognormal (median 25 tokens, at most 250; the
target's correlated with the source's). The model is conf/model/<model>.yaml. --warmup steps
(which also absorb compilation) are not timed; the next --steps are, each with CUDA events on a
GPU (read at the end) or the host clock on a CPU. Prints target and source + target tokens/s,
the step time, model TFLOP/s and MFU (against the GPU's data-sheet peak, training.health.PEAK_FLOPS;
on a CPU against a matmul peak measured in the same run), peak GPU memory, and which SDPA backend
each kind of attention gets on the first batch. --peer hf: HF MarianMTModel of the same shape on
the same batches, in a plain loop (same optimizer, schedule and autocast; on a GPU the same SDPA
kernels as ours, `attention.CUDA_BACKENDS`: no cuDNN).

--packed: ours trains on packed batches (data.packed: the same sentences end to end, no padding;
attention per sentence, `packed_attention`), and the attention report names the kernel each kind
runs (varlen: torch's variable-length kernel, or reference: unpack, SDPA, pack back); the HF peer
keeps the padded batches. Rows are sentence pairs (`len(batch["id"])`), slots the tensors' sizes
(src + tgt_in: no padding when packed).

--profile-steps N: after the timed steps, N more steps of ours under torch.profiler, and where their
time went: matmul, attention, loss (the output layer + loss: `output_layer_loss`, wrapped here in a
`record_function("loss")` range), elementwise (every other op: pointwise, norms, reductions, casts,
embeddings), optimizer (inside torch's Optimizer.step range, less the forward and backward that
Lightning runs inside it at 32-true), other (copies, memsets, engine overhead) and idle. On a GPU:
CUDA kernel time, and idle = wall time - the time some kernel ran; on a CPU: CPU op self time, and
idle = wall time - the ops' time (Python, Lightning, data loading).
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
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import torch
from torch import nn

from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.model.attention import kernels
from transformer_mt.model.embedding import sinusoid_table
from transformer_mt.model.flops import training_flops
from transformer_mt.training.loss import label_smoothed_nll_loss, output_layer_loss

ROOT = Path(__file__).resolve().parents[2]

V, PAD, BOS, EOS = 10_000, 0, 1, 2


@dataclass
class Shape:
    d: int
    ff: int
    heads: int
    layers: int
    batch: int
    length: int


SHAPES = {"base": Shape(512, 2048, 8, 6, 64, 24), "recipe": Shape(128, 256, 4, 4, 256, 16)}


class TorchTransformer(nn.Module):
    """torch.nn.Transformer with embeddings, sinusoidal positions and a tied output layer."""

    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.embed = nn.Embedding(V, shape.d, padding_idx=PAD)
        self.register_buffer("pos", sinusoid_table(256, shape.d), persistent=False)
        self.core = nn.Transformer(shape.d, shape.heads, shape.layers, shape.layers, shape.ff, dropout=0.1,
                                   batch_first=True)
        self.out = nn.Linear(shape.d, V, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, src, tgt_in):
        scale = math.sqrt(self.embed.embedding_dim)
        s = self.embed(src) * scale + self.pos[: src.size(1)]
        t = self.embed(tgt_in) * scale + self.pos[: tgt_in.size(1)]
        mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)
        return self.out(self.core(s, t, tgt_mask=mask, tgt_is_causal=True))

    def loss(self, src, tgt_in, tgt_out):
        return label_smoothed_nll_loss(self(src, tgt_in), tgt_out, 0.1, PAD)


class HFMarian(nn.Module):
    def __init__(self, shape: Shape, vocab: int = V, positions: int = 256, dropout: float = 0.1) -> None:
        super().__init__()
        import transformers

        config = transformers.MarianConfig(
            vocab_size=vocab, decoder_vocab_size=vocab, d_model=shape.d, encoder_layers=shape.layers,
            decoder_layers=shape.layers, encoder_attention_heads=shape.heads, decoder_attention_heads=shape.heads,
            encoder_ffn_dim=shape.ff, decoder_ffn_dim=shape.ff,
            activation_function="relu", max_position_embeddings=positions, scale_embedding=True, pad_token_id=PAD,
            decoder_start_token_id=BOS, dropout=dropout)
        self.model = transformers.MarianMTModel(config)

    def forward(self, src, tgt_in):
        return self.model(input_ids=src, decoder_input_ids=tgt_in).logits

    def loss(self, src, tgt_in, tgt_out):
        return label_smoothed_nll_loss(self(src, tgt_in), tgt_out, 0.1, PAD)


class Ours(nn.Module):
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.model = Transformer(config_of(shape))

    def loss(self, src, tgt_in, tgt_out):
        """As TranslationModule trains: decoder states, then output layer + loss chunk by chunk."""
        out = self.model.output_proj
        return output_layer_loss(self.model.features(src, tgt_in), out.weight, out.bias, tgt_out, 0.1, PAD)


def config_of(shape: Shape) -> TransformerConfig:
    return TransformerConfig(src_vocab_size=V, tgt_vocab_size=V, pad_id=PAD, num_encoder_layers=shape.layers,
                             num_decoder_layers=shape.layers, d_model=shape.d, d_ff=shape.ff, heads=shape.heads)


def matmul_peak(device: str, dtype: torch.dtype, n: int = 2048, reps: int = 10) -> float:
    """FLOP/s of an n x n matmul on this device and dtype, measured now."""
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    sync(device)
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - start)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    if "--loop" in sys.argv[1:]:
        return loop_main()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    parser.add_argument("--steps", type=int, default=8, help="timed steps per system (after 2 warm-up steps)")
    parser.add_argument("--shape", default="base", choices=sorted(SHAPES))
    args = parser.parse_args()
    shape = SHAPES[args.shape]
    batch, length = shape.batch, shape.length
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(4, V, (batch, length), generator=gen).to(args.device)
    tgt = torch.randint(4, V, (batch, length + 1), generator=gen).to(args.device)
    tgt[:, 0] = BOS
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    flops = training_flops(config_of(shape), batch * length, batch * length, length, length)
    print(f"device {args.device}, {torch.get_num_threads()} threads; model FLOPs per step {flops / 1e9:.1f} G\n")
    for precision in args.precision:
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        peak = matmul_peak(args.device, dtype)
        systems = {"ours": Ours(shape), "HF MarianMTModel": HFMarian(shape),
                   "torch nn.Transformer": TorchTransformer(shape)}
        optimizers = {}
        for name, model in systems.items():
            model.to(args.device).train()
            optimizers[name] = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
        seconds = {name: [] for name in systems}
        for step in range(args.steps + 2):
            names = list(systems)
            names = names[step % len(names):] + names[: step % len(names)]  # interleaved, each first in turn
            for name in names:
                model = systems[name]
                sync(args.device)
                start = time.perf_counter()
                with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16, enabled=precision == "bf16"):
                    loss_sum, _, ntokens = model.loss(src, tgt_in, tgt_out)
                (loss_sum / ntokens).backward()
                optimizers[name].step()
                optimizers[name].zero_grad(set_to_none=True)
                sync(args.device)
                if step >= 2:
                    seconds[name].append(time.perf_counter() - start)
        tokens = batch * length
        rate = {name: tokens * len(s) / sum(s) for name, s in seconds.items()}
        print(f"### {precision} (measured matmul peak {peak / 1e12:.2f} TFLOP/s)\n")
        print("| system | target tokens/s | ours / this | MFU vs measured peak |\n| --- | ---: | ---: | ---: |")
        for name, r in rate.items():
            mfu = flops * r / tokens / peak
            print(f"| {name} | {r:.0f} | {rate['ours'] / r:.2f} | {mfu:.1%} |")
        print()


# ------------------------------------------------------------------------------ --loop
LOOP_VOCAB = 37_000
PRECISION_DTYPES = {"32-true": None, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


def progress(message: str) -> None:
    print(f"[train_speed] {message}", file=sys.stderr, flush=True)


def compose_run_config(model: str, compile_: str | None):
    """The run config of `python run.py model=<model> [module.compile=<backend>]` (hydra compose)."""
    from hydra import compose, initialize_config_dir

    overrides = [f"model={model}", *([f"++module.compile={compile_}"] if compile_ else [])]
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf"), job_name="train_speed"):
        return compose(config_name="config", overrides=overrides)


def placeholder_vocabularies(size: int):
    """A vocabulary of `size` tokens: <pad>, <s>, </s>, <unk> (ids 0-3), then placeholders: the
    module takes its vocabulary size and special ids from it (the batches are made-up ids)."""
    from tokenizers import Tokenizer, models

    from transformer_mt.data.tokenizer import SPECIAL_TOKENS, UNK, BpeTokenizer, Vocabularies

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    vocab.update({f"t{i}": i for i in range(len(SPECIAL_TOKENS), size)})
    return Vocabularies(BpeTokenizer(Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))))


def synthetic_pairs(n: int, vocab: int, seed: int = 0, median: float = 25.0, max_len: int = 250):
    """n random sentence pairs as the datamodule's Arrow table (src_ids ending in EOS, tgt_ids
    without specials): source lengths lognormal (median `median`), the target's the source's times
    a lognormal factor (correlated), both at most max_len with their EOS."""
    import datasets
    import numpy as np
    import pyarrow as pa

    from transformer_mt.data.encoding import TRAIN_FEATURES

    rng = np.random.default_rng(seed)
    src_len = np.clip(np.rint(rng.lognormal(math.log(median), 0.6, n)), 2, max_len).astype(np.int32)
    tgt_len = np.clip(np.rint(src_len * rng.lognormal(0.05, 0.2, n)), 1, max_len - 1).astype(np.int32)

    def lists(lengths, ids):
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids.astype(np.int32)))

    src_ids = rng.integers(4, vocab, int(src_len.sum()))
    src_ids[np.cumsum(src_len) - 1] = EOS  # each source ends in EOS
    tgt_ids = rng.integers(4, vocab, int(tgt_len.sum()))
    columns = {"src_ids": lists(src_len, src_ids), "tgt_ids": lists(tgt_len, tgt_ids),
               "src_len": pa.array(src_len), "tgt_len": pa.array(tgt_len)}
    return datasets.Dataset.from_dict(columns, features=TRAIN_FEATURES)


def token_budget_loader(table, max_tokens: int, pad_to_multiple: int, workers: int, pin: bool, packed: bool = False):
    """Batches as the datamodule's training loader makes them (shuffled, seed 0); packed: data.packed's."""
    from torch.utils.data import DataLoader

    from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset

    dataset = TranslationDataset(table)
    padding = {"pad_to_multiple": pad_to_multiple} if pad_to_multiple > 1 else {}
    sampler = TokenBudgetBatchSampler(dataset.sizes(), max_tokens, shuffle=True, seed=0, **padding)
    return DataLoader(dataset, batch_sampler=sampler, collate_fn=Collator(PAD, BOS, EOS, packed=packed, **padding),
                      num_workers=workers, persistent_workers=workers > 0, pin_memory=pin)


class StepRecord:
    """What the timed steps (`count` of them after `skip`) saw: a timer, the batch's rows (sentence
    pairs), slots (the tensors' sizes) and token counts per step."""

    def __init__(self, device: torch.device, skip: int, count: int) -> None:
        from transformer_mt.training.health import timer_for

        self.device, self.skip, self.count, self.timer_for = device, skip, count, timer_for
        self.timers, self.batches = [], []
        self.warmup_seconds = self.wall_seconds = 0.0
        self._began = self._timed_from = 0.0
        self._finished = False

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def begin(self, step: int, batch: dict) -> None:
        if step == 0:
            self._began = time.perf_counter()
        if not self.skip <= step < self.skip + self.count:
            return
        if step == self.skip:  # warm-up (and compilation) done: one sync, then the timed steps
            self.sync()
            self._timed_from = time.perf_counter()
            self.warmup_seconds = self._timed_from - self._began
        timer = self.timer_for(self.device)
        timer.start()
        self.timers.append(timer)
        self.batches.append((len(batch["id"]), batch["src"].numel() + batch["tgt_in"].numel(),
                             batch["num_tokens"], batch["num_src_tokens"]))

    def end(self, step: int) -> None:
        if self.skip <= step < self.skip + self.count:
            self.timers[-1].stop()
            if step == self.skip + self.count - 1:
                self.finish()

    def finish(self) -> None:
        """The wall clock of the timed steps stops (once)."""
        if not self._finished:
            self.sync()
            self.wall_seconds = time.perf_counter() - self._timed_from
            self._finished = True

    def figures(self, config: TransformerConfig, peak_flops: float) -> dict:
        """Throughput of the timed steps (device time), FLOP/s and MFU, padding, wall-clock rate."""
        seconds = sum(t.seconds() for t in self.timers)
        tokens = sum(int(n) for _, _, n, _ in self.batches)
        src_tokens = sum(int(s) for _, _, _, s in self.batches)
        flops = sum(training_flops(config, int(s), int(n) - int(s), int(s) / rows, (int(n) - int(s)) / rows)
                    for rows, _, n, s in self.batches)
        slots = sum(slots for _, slots, _, _ in self.batches)
        return {"steps": len(self.timers), "target_tokens_per_s": (tokens - src_tokens) / seconds,
                "tokens_per_s": tokens / seconds, "step_ms": 1000 * seconds / len(self.timers),
                "step_ms_max": 1000 * max(t.seconds() for t in self.timers),  # a recompile shows here
                "tflops": flops / seconds / 1e12, "mfu": flops / seconds / peak_flops,
                "wall_tokens_per_s": tokens / self.wall_seconds, "padding": 1 - tokens / slots,
                "tokens_per_step": tokens / len(self.timers), "warmup_s": self.warmup_seconds}


def lightning_timer(record: StepRecord):
    """A Lightning callback that times each training batch (start to end of its optimizer step)."""
    from lightning.pytorch.callbacks import Callback

    class StepTimer(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            record.begin(trainer.global_step, batch)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            record.end(trainer.global_step - 1)

        def on_train_end(self, trainer, pl_module) -> None:
            record.finish()

    return StepTimer()


# ------------------------------------------------------------------------------ --profile-steps
CATEGORIES = ("matmul", "attention", "loss", "elementwise", "optimizer", "other", "idle")
MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::matmul",
              "aten::linear", "aten::_scaled_mm", "aten::mv", "aten::addmv", "aten::dot"}


def category(event, kernel: str = "") -> str:
    """Where a profiled op (or a kernel it launched) belongs: the innermost range or op that says
    (loss, attention, a forward or backward pass, torch's Optimizer ranges), else the op itself."""
    if kernel.startswith(("Memcpy", "Memset")):
        return "other"
    node = event
    while node is not None:
        name = node.name.lower()
        if name == "loss" or "outputlayerloss" in name:
            return "loss"
        if "attention" in name or "attn" in name:
            return "attention"
        if name == "forward" or name.startswith("autograd::engine::evaluate_function"):
            break  # the forward or a backward op: not the optimizer's, whatever encloses it
        if name.startswith("optimizer."):
            return "optimizer"
        node = node.cpu_parent
    if event.name in MATMUL_OPS or any(marker in f"{event.name} {kernel}".lower() for marker in ("gemm", "triton_tem")):
        return "matmul"
    return "elementwise" if kernel or event.name.startswith(("aten::", "triton_")) else "other"


def busy_us(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def time_per_category(events, cuda: bool, wall_us: float) -> dict:
    """Microseconds per category of profiled `events`: CUDA kernel time on a GPU (each kernel in its
    launching op's category; idle = wall - the union of the kernels' intervals), CPU op self time
    on a CPU (idle = wall - their sum)."""
    from torch.autograd import DeviceType

    totals = dict.fromkeys(CATEGORIES, 0.0)
    if cuda:  # kernels, copies, memsets; not the device spans of record_function ranges (as torch's tables)
        device = [e for e in events if e.device_type == DeviceType.CUDA and not e.is_user_annotation]
        for event in events:
            if event.device_type == DeviceType.CPU:
                for kernel in event.kernels:
                    totals[category(event, kernel.name)] += kernel.duration
        attributed = sum(totals.values())
        totals["other"] += max(0.0, sum(e.time_range.elapsed_us() for e in device) - attributed)
        busy = busy_us([(e.time_range.start, e.time_range.end) for e in device])
    else:
        for event in events:
            if event.device_type == DeviceType.CPU and not event.is_user_annotation and not event.is_async:
                totals[category(event)] += event.self_cpu_time_total
        busy = sum(totals.values())
    totals["idle"] = max(0.0, wall_us - busy)
    return {"busy_us": busy, **totals}


def profile_ranges():
    """Ranges the profile sorts by: `loss` around the module's output_layer_loss, `forward` around
    its training_step (patched in this process only, while the block runs)."""
    from torch.profiler import record_function

    from transformer_mt.training import module

    loss_fn, step_fn = module.output_layer_loss, module.TranslationModule.training_step

    def loss(*args, **kwargs):
        with record_function("loss"):
            return loss_fn(*args, **kwargs)

    def training_step(self, *args, **kwargs):
        with record_function("forward"):
            return step_fn(self, *args, **kwargs)

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(module, "output_layer_loss", loss))
    stack.enter_context(mock.patch.object(module.TranslationModule, "training_step", training_step))
    return stack


def profile_callback(device: torch.device, first: int, count: int, out: dict):
    """A Lightning callback that runs steps first .. first + count - 1 under torch.profiler and puts
    their time per category into `out`."""
    from lightning.pytorch.callbacks import Callback
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    class ProfileSteps(Callback):
        profiler = None

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            if trainer.global_step == first:
                self.profiler = profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])])
                self.profiler.start()
                sync()
                self.started = time.perf_counter()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            if self.profiler is None or trainer.global_step - 1 != first + count - 1:
                return
            sync()
            wall_us = 1e6 * (time.perf_counter() - self.started)
            self.profiler.stop()
            totals = time_per_category(self.profiler.events(), cuda, wall_us)
            busy = totals.pop("busy_us")
            out.update({"steps": count, "basis": "CUDA kernel time" if cuda else "CPU op self time",
                        "wall_ms_per_step": wall_us / count / 1000, "busy_ms_per_step": busy / count / 1000,
                        "ms_per_step": {k: v / count / 1000 for k, v in totals.items()},
                        "share": {k: v / wall_us for k, v in totals.items()}})
            self.profiler = None

    return ProfileSteps()


def profile_markdown(profile: dict) -> str:
    """The profile of --profile-steps as a Markdown table."""
    steps = f"{profile['steps']} step" + ("s" if profile["steps"] != 1 else "")
    lines = [f"Profile of {steps} ({profile['basis']}): {profile['wall_ms_per_step']:.1f} ms a step, "
             f"{profile['busy_ms_per_step']:.1f} ms busy", "", "| category | ms per step | share |",
             "| --- | ---: | ---: |"]
    lines += [f"| {k} | {v:.2f} | {profile['share'][k]:.1%} |" for k, v in profile["ms_per_step"].items()]
    return "\n".join(lines)


def peak_memory_gb(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def peak_flops_of(device: torch.device, precision: str) -> tuple[float, str]:
    """The GPU's data-sheet peak at this precision; else (a CPU, an unknown GPU) a matmul peak measured now."""
    from transformer_mt.training.health import known_peak_flops

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
    from transformer_mt.model.backends import kind_of

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


def train_ours(args, cfg, table, device: torch.device, peak: float) -> tuple[dict, dict]:
    """TranslationModule through lightning.Trainer.fit: its figures (with --profile-steps, the
    profile), and the SDPA call and backend (packed: the kernel) of each attention kind on the
    first batch."""
    import lightning as L
    from hydra.utils import instantiate
    from lightning.pytorch.loggers import CSVLogger

    from transformer_mt.model.backends import attention_calls, backend_of
    from transformer_mt.tasks.build import architecture
    from transformer_mt.training.health import TrainingHealth

    L.seed_everything(0, verbose=False)
    make = instantiate(cfg.module, _partial_=True, _recursive_=False)
    module = make(model=architecture(cfg.model), tokenizer=placeholder_vocabularies(args.vocab).to_dict())
    loader = token_budget_loader(table, args.tokens, args.pad_to_multiple, args.workers, device.type == "cuda",
                                 args.packed)
    first = next(iter(loader))
    model = module.model.to(device).train()
    if args.packed:
        attention = packed_attention_report(model, first, PRECISION_DTYPES[args.precision])
    else:
        calls = attention_calls(model, first["src"].to(device), first["tgt_in"].to(device),
                                PRECISION_DTYPES[args.precision])
        attention = {kind: {"backend": backend_of(call), **call.describe()} for kind, call in calls.items()}
        del calls
    del first
    record, profile = StepRecord(device, args.warmup, args.steps), {}
    callbacks = [lightning_timer(record), TrainingHealth(peak_flops=peak)]
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
    """The figures of one --loop run as a Markdown table."""
    lines = [f"model={result['model']} ({result['parameters'] / 1e6:.1f}M parameters), {result['max_tokens']} tokens "
             f"per batch, {result['precision']}, {result['device_name']}, torch {result['torch']}; MFU against "
             f"{result['peak_tflops']:.3g} TFLOP/s ({result['peak_source']}); "
             + ", ".join(f"{kind}: {a['backend']}" for kind, a in result["attention"].items()), "",
             "| system | compile | packed | target tokens/s | src+tgt tokens/s | step ms | TFLOP/s | MFU | peak GPU GB "
             "| padding | warm-up s |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in result["systems"]:
        memory = "-" if r["peak_memory_gb"] is None else f"{r['peak_memory_gb']:.1f}"
        lines.append(f"| {r['system']} | {r['compile'] or 'no'} | {'yes' if r['packed'] else 'no'} "
                     f"| {r['target_tokens_per_s']:,.0f} | {r['tokens_per_s']:,.0f} | {r['step_ms']:.1f} "
                     f"| {r['tflops']:.2f} | {r['mfu']:.1%} | {memory} | {r['padding']:.1%} | {r['warmup_s']:.1f} |")
    profile = result["systems"][0].get("profile")
    return "\n".join(lines + (["", profile_markdown(profile)] if profile else []))


def loop_main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loop", action="store_true", required=True)
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
    cfg = compose_run_config(args.model, args.compile)
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
    result = {"benchmark": "train_speed --loop", "model": args.model, "parameters": ours["parameters"],
              "vocab": args.vocab, "max_tokens": args.tokens, "precision": args.precision,
              "compile": args.compile or False, "pad_to_multiple": args.pad_to_multiple, "packed": args.packed,
              "warmup_steps": args.warmup, "timed_steps": args.steps, "profile_steps": args.profile_steps,
              "device": args.device,
              "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
              "threads": torch.get_num_threads(), "torch": torch.__version__, "peak_tflops": peak / 1e12,
              "peak_source": peak_source, "attention": attention, "systems": systems}
    print(markdown(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
