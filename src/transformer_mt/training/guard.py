"""The NaN / inf guard: a step whose loss is not finite changes no weight, and a run whose steps
keep failing stops with one line, keeping the checkpoints it wrote before. It decides on the
device: the host reads its counters only on logging steps and when a checkpoint is written."""

import logging
from dataclasses import dataclass, fields

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from transformer_mt.errors import TrainingDiverged
from transformer_mt.training.steps import StepWatch

log = logging.getLogger(__name__)


@dataclass
class Counts:
    """What the guard counts: on the device as 0-d float64 tensors (`Counts.start`), on the host as
    floats (`read`)."""

    in_a_row: torch.Tensor | float  # non-finite steps in a row, up to the last step
    skipped: torch.Tensor | float  # non-finite steps since the last check
    last_loss: torch.Tensor | float  # the loss of the last non-finite step
    last_step: torch.Tensor | float  # its step (-1: none yet)
    stop_loss: torch.Tensor | float  # the loss of the step that made max_nonfinite_steps in a row
    stop_step: torch.Tensor | float  # that step (-1: not reached)

    @classmethod
    def start(cls, device: torch.device) -> "Counts":
        values = torch.tensor([0, 0, 0, -1, 0, -1], dtype=torch.float64, device=device)
        return cls(*values.unbind())

    def read(self) -> "Counts":
        """The counts as host floats: one read of the device."""
        return Counts(*torch.stack([getattr(self, f.name) for f in fields(self)]).tolist())


def learning_rate(trainer: L.Trainer) -> float:
    """The learning rate of the step being made (of the first parameter group)."""
    return trainer.optimizers[0].param_groups[0]["lr"] if trainer.optimizers else float("nan")


def honours_found_inf(optimizer: torch.optim.Optimizer) -> bool:
    """Whether `optimizer.step()` skips itself when `optimizer.found_inf` is 1 (torch's fused
    implementations, the same mechanism torch.amp.GradScaler uses): weights, moments and step
    counts stay as they were, decided on the device."""
    return all(group.get("fused", False) for group in optimizer.param_groups)


class NonFiniteGuard(Callback):
    """Skips every optimizer step with a NaN or inf loss (on any rank, in any accumulated batch),
    while the step counter and the schedule advance as Lightning counts them. After `max_nonfinite_steps`
    such steps in a row training stops with TrainingDiverged. A checkpoint is never written with
    NaN / inf weights.

    The decision (`decide`) is step 4 of the training step (training/steps.py), called by the
    module's on_before_optimizer_step, after every callback has seen the gradients. With a fused
    optimizer (the presets' Adam) it stays on the device: the flag is handed to the optimizer as
    `found_inf`, which makes its step a no-op, and the counts are read on logging steps and before
    a checkpoint is written, so a run stops at the first of those after its `max_nonfinite_steps`-th bad
    step in a row (the steps in between change nothing either). Any other optimizer gets the flag
    read on the host every step and the step's gradients dropped.
    """

    def __init__(self, max_nonfinite_steps: int = 3) -> None:
        self.max_nonfinite_steps = max_nonfinite_steps
        self.counts: Counts | None = None  # on the device, from the start of training
        self._bad: torch.Tensor | None = None  # this step's flag: any accumulated loss not finite
        self._bad_loss: torch.Tensor | None = None  # that loss
        self._lrs: dict[int, float] = {}  # the learning rate of each step since the last check
        self.watch = StepWatch()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.counts = Counts.start(pl_module.device)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        self.watch.start(trainer)

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        loss = loss.detach().float()
        bad = ~torch.isfinite(loss)
        self._bad = bad if self._bad is None else self._bad | bad
        self._bad_loss = loss if self._bad_loss is None else torch.where(bad, loss, self._bad_loss)

    def decide(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: torch.optim.Optimizer) -> None:
        """Count this step, and skip it if its loss was not finite on any rank."""
        if self._bad is None:  # no loss this step
            return
        bad = trainer.strategy.reduce(self._bad.float(), reduce_op="sum") > 0  # every rank alike
        step = trainer.global_step
        self._lrs[step] = learning_rate(trainer)
        c = self.counts
        c.in_a_row = torch.where(bad, c.in_a_row + 1, 0)
        c.skipped = c.skipped + bad
        c.last_loss = torch.where(bad, self._bad_loss.double(), c.last_loss)
        c.last_step = torch.where(bad, step, c.last_step)
        reached = (c.in_a_row >= self.max_nonfinite_steps) & (c.stop_step < 0)
        c.stop_loss = torch.where(reached, c.last_loss, c.stop_loss)
        c.stop_step = torch.where(reached, step, c.stop_step)
        self._bad = self._bad_loss = None
        if honours_found_inf(optimizer):
            optimizer.found_inf = bad.float()
        elif bool(bad):
            for p in pl_module.parameters():
                p.grad = None
            self.check()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch,
                           batch_idx: int) -> None:
        for optimizer in trainer.optimizers:
            if hasattr(optimizer, "found_inf"):
                del optimizer.found_inf
        if self.watch.logged(trainer):
            self.check()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.check()

    def check(self) -> None:
        """Read the counts on the host: warn about the steps skipped since the last check, and
        stop the run if `max_nonfinite_steps` came in a row."""
        if self.counts is None:
            return
        now = self.counts.read()
        if now.skipped:
            step = int(now.last_step)
            log.warning("train: loss is %s at step %d (lr %.3g): step skipped%s", now.last_loss, step,
                        self._lrs.get(step, float("nan")),
                        f" ({int(now.skipped)} skipped since the last log)" if now.skipped > 1 else "")
            self.counts.skipped = torch.zeros_like(self.counts.skipped)
        if now.stop_step >= 0:
            step = int(now.stop_step)
            raise TrainingDiverged(
                f"train: loss {now.stop_loss} at step {step} (lr {self._lrs.get(step, float('nan')):.3g}), "
                f"{self.max_nonfinite_steps} steps in a row (module.max_nonfinite_steps={self.max_nonfinite_steps}); "
                "training stopped, "
                "the checkpoints written before are kept")
        self._lrs.clear()

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        if trainer.training:
            self.check()
        if not torch.stack([torch.isfinite(p).all() for p in pl_module.parameters()]).all():
            raise TrainingDiverged(f"train: the weights became NaN or inf at step {trainer.global_step} "
                                   f"(lr {learning_rate(trainer):.3g}); no checkpoint was written, the earlier ones "
                                   "are kept")
