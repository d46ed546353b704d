"""A step budget that ends like a time budget: the final weights are validated and kept."""

import lightning as L
from lightning.pytorch.callbacks import Callback


class StepBudget(Callback):
    """Stops at `trainer.max_steps` through `trainer.should_stop`, as Lightning's `Timer` stops at
    `trainer.max_time`: a run whose last step falls inside an epoch then validates its final weights
    (and the epoch checkpoint callback keeps them, for `task.last_n`). Left alone, Lightning
    ends such a run without validating, so its last partial epoch would be trained and never used."""

    def on_train_batch_end(self, trainer: L.Trainer, *args: object) -> None:
        if trainer.max_steps > 0 and trainer.global_step >= trainer.max_steps:
            trainer.should_stop = True
