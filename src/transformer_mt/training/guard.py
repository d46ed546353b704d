"""The NaN / inf guard: a step whose loss is not finite changes no weight, and a run whose steps
keep failing stops with one line, keeping the checkpoints it wrote before."""

import logging

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from transformer_mt.errors import TrainingDiverged

log = logging.getLogger(__name__)


def learning_rate(trainer: L.Trainer) -> float:
    """The learning rate of the step being made (of the first parameter group)."""
    return trainer.optimizers[0].param_groups[0]["lr"] if trainer.optimizers else float("nan")


class NonFiniteGuard(Callback):
    """Skips every optimizer step with a NaN or inf loss (on any rank, in any accumulated batch): its
    gradients are dropped before the step, so the optimizer changes no weight, while the step counter
    and the schedule advance as Lightning counts them. After `max_steps` such steps in a row training
    stops with TrainingDiverged. A checkpoint is never written with NaN / inf weights."""

    def __init__(self, max_steps: int = 3) -> None:
        self.max_steps = max_steps
        self.in_a_row = 0
        self.bad_loss: float | None = None  # the non-finite loss of the step being made
        self.skipped: tuple[float, int, float] | None = None  # (loss, step, lr) of the step just skipped

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        if not bool(torch.isfinite(loss)):
            self.bad_loss = float(loss)

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer) -> None:
        bad = trainer.strategy.reduce_boolean_decision(self.bad_loss is not None, all=False)  # every rank alike
        if bad:
            self.skipped = (self.bad_loss if self.bad_loss is not None else float("nan"), trainer.global_step,
                            learning_rate(trainer))
            for p in pl_module.parameters():
                p.grad = None
        self.bad_loss = None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        if self.skipped is None:
            self.in_a_row = 0 if self.bad_loss is None else self.in_a_row
            return
        (loss, step, lr), self.skipped = self.skipped, None
        self.in_a_row += 1
        log.warning("train: loss is %s at step %d (lr %.3g): step skipped", loss, step, lr)
        if self.in_a_row >= self.max_steps:
            raise TrainingDiverged(
                f"train: loss {loss} at step {step} (lr {lr:.3g}), {self.in_a_row} steps in a row "
                f"(module.max_nonfinite_steps={self.max_steps}); training stopped, the checkpoints written before "
                "are kept")

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        if not torch.stack([torch.isfinite(p).all() for p in pl_module.parameters()]).all():
            raise TrainingDiverged(f"train: the weights became NaN or inf at step {trainer.global_step} "
                                   f"(lr {learning_rate(trainer):.3g}); no checkpoint was written, the earlier ones "
                                   "are kept")
