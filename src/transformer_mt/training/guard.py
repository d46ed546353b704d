"""The NaN / inf guard: a step whose loss is not finite changes no weight, and a run whose steps
keep failing stops with one line, keeping the checkpoints it wrote before. It decides on the
device: the host reads its counters only on logging steps and when a checkpoint is written."""

import logging

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback

from transformer_mt.errors import TrainingDiverged
from transformer_mt.training.health import StepWatch

log = logging.getLogger(__name__)

# the guard's counters on the device, one float64 vector (indices below)
IN_A_ROW, SKIPPED, LAST_LOSS, LAST_STEP, STOP_LOSS, STOP_STEP = range(6)


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
    while the step counter and the schedule advance as Lightning counts them. After `max_steps`
    such steps in a row training stops with TrainingDiverged. A checkpoint is never written with
    NaN / inf weights.

    With a fused optimizer (the presets' Adam) the decision stays on the device: the flag is handed
    to the optimizer as `found_inf`, which makes its step a no-op, and the counters are read on
    logging steps and before a checkpoint is written, so a run stops at the first of those after
    its `max_steps`-th bad step in a row (the steps in between change nothing either). Any other
    optimizer gets the flag read on the host every step and the step's gradients dropped.
    """

    def __init__(self, max_steps: int = 3) -> None:
        self.max_steps = max_steps
        self.state: torch.Tensor | None = None  # the counters (IN_A_ROW, ...) on the device
        self._bad: torch.Tensor | None = None  # this step's flag: any accumulated loss not finite
        self._bad_loss: torch.Tensor | None = None  # that loss
        self._lrs: dict[int, float] = {}  # the learning rate of each step since the last check
        self.watch = StepWatch()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.state = torch.tensor([0, 0, 0, -1, 0, -1], dtype=torch.float64, device=pl_module.device)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        self.watch.start(trainer)

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        loss = loss.detach().float()
        bad = ~torch.isfinite(loss)
        self._bad = bad if self._bad is None else self._bad | bad
        self._bad_loss = loss if self._bad_loss is None else torch.where(bad, loss, self._bad_loss)

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer) -> None:
        if self._bad is None:  # no loss this step
            return
        bad = trainer.strategy.reduce(self._bad.float(), reduce_op="sum") > 0  # every rank alike
        step = trainer.global_step
        self._lrs[step] = learning_rate(trainer)
        s = self.state
        s[IN_A_ROW] = torch.where(bad, s[IN_A_ROW] + 1, 0)
        s[SKIPPED] += bad
        s[LAST_LOSS] = torch.where(bad, self._bad_loss.double(), s[LAST_LOSS])
        s[LAST_STEP] = torch.where(bad, step, s[LAST_STEP])
        reached = (s[IN_A_ROW] >= self.max_steps) & (s[STOP_STEP] < 0)
        s[STOP_LOSS] = torch.where(reached, s[LAST_LOSS], s[STOP_LOSS])
        s[STOP_STEP] = torch.where(reached, step, s[STOP_STEP])
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
        """Read the counters on the host: warn about the steps skipped since the last check, and
        stop the run if `max_steps` came in a row."""
        if self.state is None:
            return
        in_a_row, skipped, last_loss, last_step, stop_loss, stop_step = self.state.tolist()
        if skipped:
            step = int(last_step)
            log.warning("train: loss is %s at step %d (lr %.3g): step skipped%s", last_loss, step,
                        self._lrs.get(step, float("nan")),
                        f" ({int(skipped)} skipped since the last log)" if skipped > 1 else "")
            self.state[SKIPPED] = 0
        if stop_step >= 0:
            step = int(stop_step)
            raise TrainingDiverged(
                f"train: loss {stop_loss} at step {step} (lr {self._lrs.get(step, float('nan')):.3g}), "
                f"{self.max_steps} steps in a row (module.max_nonfinite_steps={self.max_steps}); training stopped, "
                "the checkpoints written before are kept")
        self._lrs.clear()

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        if trainer.training:
            self.check()
        if not torch.stack([torch.isfinite(p).all() for p in pl_module.parameters()]).all():
            raise TrainingDiverged(f"train: the weights became NaN or inf at step {trainer.global_step} "
                                   f"(lr {learning_rate(trainer):.3g}); no checkpoint was written, the earlier ones "
                                   "are kept")
