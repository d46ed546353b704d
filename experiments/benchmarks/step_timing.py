"""Timing training steps for the speed benchmarks: a matmul peak measured now (what MFU is
against where no data-sheet peak is known), and StepRecord, the timed steps of a run with their
batches' sizes, fed by a Lightning callback or by a plain loop."""

import time

import torch

from transformer_mt.model import TransformerConfig
from transformer_mt.model.flops import training_flops


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



class StepRecord:
    """What the timed steps (`count` of them after `skip`) saw: a timer, the batch's rows (sentence
    pairs), slots (the tensors' sizes) and token counts per step."""

    def __init__(self, device: torch.device, skip: int, count: int) -> None:
        from transformer_mt.training.step_meter import timer_for

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
