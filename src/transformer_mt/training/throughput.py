"""Training throughput: real (unpadded) source + target tokens per second of this process."""

import time

import lightning as L
from lightning.pytorch.callbacks import Callback


class Throughput(Callback):
    """Times every training batch (from its start to the end of its optimizer step) and logs
    train/tokens_per_sec; `tokens_per_sec()` is the mean over the whole run so far."""

    def __init__(self) -> None:
        self.tokens, self.seconds = 0, 0.0
        self._started = 0.0

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: dict,
                             batch_idx: int) -> None:
        self._started = time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch: dict,
                           batch_idx: int) -> None:
        seconds = time.perf_counter() - self._started
        self.tokens += batch["num_tokens"]
        self.seconds += seconds
        pl_module.log("train/tokens_per_sec", batch["num_tokens"] / max(seconds, 1e-9))

    def tokens_per_sec(self) -> float:
        """Mean training throughput of this process since training started."""
        return self.tokens / self.seconds if self.seconds else 0.0
