"""The step meter: one callback that times each logged training step once and logs what the step
achieved: train/tokens_per_sec, train/tflops, train/mfu, train/padding, train/grad_norm and, on
CUDA, train/gpu_mem_gb.

A batch is timed from its start to the end of its optimizer step by `timer_for` its device: CUDA
events on a GPU (recorded on the stream, so the host never waits), the host clock on a CPU. The
figures are computed, and the timer read (on a GPU: one wait for the device), only on the batch that
made a logged step (training/steps.py: StepWatch), so gradient accumulation adds no host sync.
"""

import time
from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from transformer_mt.model.flops import training_flops
from transformer_mt.training.steps import StepWatch, logged_step

# Dense bf16 / fp16 tensor-core peak FLOP/s per GPU (vendor data sheets), and the fp32 peak without
# tensor cores; looked up by a name contained in torch.cuda.get_device_name(), first match wins.
PEAK_FLOPS: list[tuple[str, float, float]] = [  # name, 16-bit peak, 32-bit peak
    ("H100 PCIe", 756e12, 51e12),
    ("H100 NVL", 835e12, 60e12),
    ("H100", 989e12, 67e12),
    ("H200", 989e12, 67e12),
    ("H20", 148e12, 44e12),
    ("A100", 312e12, 19.5e12),
    ("L40S", 362e12, 91.6e12),
    ("L4", 121e12, 30.3e12),
    ("A10", 125e12, 31.2e12),
    ("V100", 125e12, 15.7e12),
    ("T4", 65e12, 8.1e12),
]


def known_peak_flops(device_name: str, precision: str) -> float | None:
    """The peak FLOP/s of a known GPU at a Lightning precision ("bf16-mixed", "32-true", ...)."""
    for name, peak16, peak32 in PEAK_FLOPS:
        if name in device_name:
            return peak16 if precision.startswith(("bf16", "16", "half")) else peak32
    return None


class HostTimer:
    """Host wall-clock time from start() to stop(): what a step takes on a CPU."""

    def __init__(self) -> None:
        self._start = self._stop = 0.0

    def start(self) -> None:
        self._start = time.perf_counter()

    def stop(self) -> None:
        self._stop = time.perf_counter()

    def seconds(self) -> float:
        return self._stop - self._start


class CudaTimer:
    """GPU time from start() to stop(): CUDA events recorded on the current stream, so the host
    never waits while timing. seconds() waits for the stop event (a sync): call it only when the
    figure is needed. `event` makes an event (torch.cuda.Event(enable_timing=True) by default);
    the events are made at the first start(), never before."""

    def __init__(self, event: Callable[[], Any] | None = None) -> None:
        self._make = event or (lambda: torch.cuda.Event(enable_timing=True))
        self._events: tuple[Any, Any] | None = None

    def start(self) -> None:
        if self._events is None:
            self._events = (self._make(), self._make())
        self._events[0].record()

    def stop(self) -> None:
        self._events[1].record()

    def seconds(self) -> float:
        start, stop = self._events
        stop.synchronize()
        return start.elapsed_time(stop) / 1000.0  # milliseconds


def timer_for(device: torch.device) -> HostTimer | CudaTimer:
    """CUDA events on a CUDA device, the host clock elsewhere."""
    return CudaTimer() if device.type == "cuda" else HostTimer()


class StepMeter(Callback):
    """Logs, on logging steps: train/tokens_per_sec (the real source + target tokens of the batches
    since the previous logging step over the wall-clock time they took, loading included,
    validation not), train/tflops (model TFLOP/s of the logged step, from the architecture:
    transformer_mt.model.flops), train/mfu (that over the device's peak), train/padding (the padded
    fraction of the batch's slots), train/grad_norm (total 2-norm before clipping) and, on CUDA,
    train/gpu_mem_gb (max allocated). `tokens_per_sec()`: this process's mean over the run so far.

    peak_flops: the peak FLOP/s of one device at the run's precision; None looks the GPU up in
    PEAK_FLOPS (no MFU on a CPU or an unknown GPU unless it is given).
    """

    def __init__(self, peak_flops: float | None = None) -> None:
        self.peak_flops = float(peak_flops) if peak_flops is not None else None
        self.timer: HostTimer | CudaTimer = HostTimer()
        self.watch = StepWatch()
        self.tokens, self.seconds = 0, 0.0  # of the run so far
        self._tokens, self._started = 0, None  # of the interval since the last logging step

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.timer = timer_for(trainer.strategy.root_device)
        if self.peak_flops is None and trainer.strategy.root_device.type == "cuda":
            name = torch.cuda.get_device_name(trainer.strategy.root_device)
            self.peak_flops = known_peak_flops(name, str(trainer.precision))

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer) -> None:
        """Gradients are complete (and unscaled under fp16) here, not yet clipped, and not yet
        dropped by the NaN / inf guard (training/steps.py: step 3 of 6)."""
        if not logged_step(trainer, trainer.global_step + 1):
            return
        grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
        if grads:
            pl_module.log("train/grad_norm", torch.nn.utils.get_total_norm(grads))

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: dict,
                             batch_idx: int) -> None:
        self.watch.start(trainer)
        if self._started is None:
            self._started = time.perf_counter()
        self.timer.start()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch: dict,
                           batch_idx: int) -> None:
        self.timer.stop()
        self._tokens += batch["num_tokens"]
        if not self.watch.logged(trainer):  # with accumulation, only the batch that made the logged step
            return
        step_seconds = max(self.timer.seconds(), 1e-9)  # on a GPU the one wait: the device is done after it
        tokens, seconds = self.close_interval()
        pl_module.log("train/tokens_per_sec", tokens / max(seconds, 1e-9))
        rows = batch["id"].numel()  # sentence pairs, padded or packed
        src_tokens, tgt_tokens = batch["num_src_tokens"], batch["num_tokens"] - batch["num_src_tokens"]
        pl_module.log("train/padding", 1.0 - batch["num_tokens"] / (batch["src"].numel() + batch["tgt_in"].numel()))
        flops = training_flops(pl_module.model.config, src_tokens, tgt_tokens, src_tokens / rows, tgt_tokens / rows)
        pl_module.log("train/tflops", flops / step_seconds / 1e12)
        if self.peak_flops:
            pl_module.log("train/mfu", flops / step_seconds / self.peak_flops)
        if trainer.strategy.root_device.type == "cuda":
            pl_module.log("train/gpu_mem_gb", torch.cuda.max_memory_allocated(trainer.strategy.root_device) / 2**30)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.close_interval(pl_module.device)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.close_interval(pl_module.device)

    def close_interval(self, device: torch.device | None = None) -> tuple[int, float]:
        """End the interval since the last logging step: its tokens and seconds. `device`: wait for
        its work first (outside a step: before validation, at the end); None: it is done already."""
        if self._started is None:
            return 0, 0.0
        if device is not None and device.type == "cuda":
            torch.cuda.synchronize(device)
        tokens, seconds = self._tokens, time.perf_counter() - self._started
        self.tokens, self.seconds = self.tokens + tokens, self.seconds + seconds
        self._tokens, self._started = 0, None
        return tokens, seconds

    def tokens_per_sec(self) -> float:
        """Mean training throughput of this process since training started."""
        return self.tokens / self.seconds if self.seconds else 0.0
