"""Training throughput: real (unpadded) source + target tokens per second of this process."""

import time

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from transformer_mt.training.steps import StepWatch


class Throughput(Callback):
    """Logs train/tokens_per_sec on logging steps: the tokens of the batches since the previous
    logging step over the time they took (loading included, validation not); `tokens_per_sec()` is
    the mean over the whole run so far. Token counts are host numbers of the batch; on a GPU the
    clock is read after the device has finished the interval's work (a sync on logging steps only)."""

    def __init__(self) -> None:
        self.tokens, self.seconds = 0, 0.0
        self._tokens = 0  # of the interval being timed
        self._started: float | None = None
        self.watch = StepWatch()

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: dict,
                             batch_idx: int) -> None:
        self.watch.start(trainer)
        if self._started is None:
            self._started = time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch: dict,
                           batch_idx: int) -> None:
        self._tokens += batch["num_tokens"]
        if self.watch.logged(trainer):
            tokens, seconds = self.close_interval(pl_module.device)
            pl_module.log("train/tokens_per_sec", tokens / max(seconds, 1e-9))

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.close_interval(pl_module.device)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.close_interval(pl_module.device)

    def close_interval(self, device: torch.device) -> tuple[int, float]:
        """End the interval being timed (after the device's work): its tokens and seconds."""
        if self._started is None:
            return 0, 0.0
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        tokens, seconds = self._tokens, time.perf_counter() - self._started
        self.tokens += tokens
        self.seconds += seconds
        self._tokens, self._started = 0, None
        return tokens, seconds

    def tokens_per_sec(self) -> float:
        """Mean training throughput of this process since training started."""
        return self.tokens / self.seconds if self.seconds else 0.0
