"""The training step, in order, and the one rule for which steps log.

An optimizer step runs (Lightning's automatic optimization; each number is one place in the code):

    1. loss           TranslationModule.training_step (the loss's values logged on logging steps)
    2. backward       NonFiniteGuard.on_before_backward notes, on the device, whether the loss is finite
                      (with gradient accumulation 1 and 2 repeat for each batch of the step)
    3. gradient norm  the callbacks' on_before_optimizer_step: StepMeter logs train/grad_norm,
                      before clipping, on logging steps
    4. found_inf      TranslationModule.on_before_optimizer_step: NonFiniteGuard.decide hands a
                      fused optimizer `found_inf` (its step becomes a no-op on the device), or, for
                      any other optimizer, drops the gradients of a non-finite step
    5. clipping       TranslationModule.configure_gradient_clipping
    6. optimizer step

Lightning calls every callback's on_before_optimizer_step before the module's, and clips after
both (`Precision._after_closure`), so 3 reads the gradients before 4 may drop them, whatever the
order of the callbacks. tests/training/test_step_order.py records the order and fails if it changes.

Which steps log is decided by `logged_step` (a step in progress) and `StepWatch` (a batch that
has just ended), and nowhere else: the figures of a step are computed, and the host reads the
device, only on those steps.
"""

import lightning as L


def logged_step(trainer: L.Trainer, step: int) -> bool:
    """Whether the values logged at optimizer step `step` (counted from 1) reach the loggers, as
    Lightning decides it: every `trainer.log_every_n_steps` steps, and at the last one. (During a
    step, before its optimizer step: trainer.global_step + 1; in on_train_batch_end, after it:
    trainer.global_step.)"""
    every = trainer.log_every_n_steps
    return bool(trainer.fast_dev_run) or trainer.should_stop or (every > 0 and step % every == 0)


class StepWatch:
    """For callbacks that act on logging steps in `on_train_batch_end`: whether the batch that just
    ended made a logged optimizer step (with gradient accumulation, only the last batch of a step
    makes it). Call `start` in `on_train_batch_start`."""

    def __init__(self) -> None:
        self.before = -1

    def start(self, trainer: L.Trainer) -> None:
        self.before = trainer.global_step

    def logged(self, trainer: L.Trainer) -> bool:
        return trainer.global_step != self.before and logged_step(trainer, trainer.global_step)
