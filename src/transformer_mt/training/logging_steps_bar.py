"""Training's progress bar: Lightning's rich bar, reading the logged training values on logging steps
only. (Everything else that shows progress uses transformer_mt.progress.ProgressBar.)"""

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar

from transformer_mt.training.steps import StepWatch

TRAIN_KEYS = ("train/loss", "train/lr")  # shown beside the bar during training


def shown(key: str, value: float) -> float | str:
    """A value as the bar shows it: the learning rate in scientific notation (the bar's own 3
    decimals would show a Transformer's 0.0007 as 0.001, and any warm-up start as 0.000)."""
    return f"{value:.2e}" if key.endswith("/lr") else value


class LoggingStepsProgressBar(RichProgressBar):
    """Lightning's rich progress bar, showing train/loss and train/lr as of the last logging step.

    The module logs them without `prog_bar=True`: Lightning converts every progress-bar value to a
    Python number after every batch, and reading a value from the device waits for the device (on
    a GPU, a stall every step). This bar reads them itself, on logging steps only."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._train: dict[str, float] = {}
        self.watch = StepWatch()

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        super().on_train_batch_start(trainer, pl_module, batch, batch_idx)
        self.watch.start(trainer)

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict:
        if trainer.training and self.watch.logged(trainer):
            logged = trainer.callback_metrics
            self._train = {key: shown(key, float(logged[key])) for key in TRAIN_KEYS if key in logged}
        return {**super().get_metrics(trainer, pl_module), **self._train}
