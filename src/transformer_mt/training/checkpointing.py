"""Checkpoints that survive kills: `last.ckpt` kept current, and every checkpoint written atomically."""

import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.exceptions import SIGTERMException

from transformer_mt.atomic import atomic_file
from transformer_mt.errors import ConfigError
from transformer_mt.training.interrupt import CTRL_C, CtrlC, handle_sigterm_in_training
from transformer_mt.training.steps import logged_step
from transformer_mt.training.stop_notice import StopNotice


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes a checkpoint to a temporary file beside its destination, fsyncs it and renames it into
    place, so a kill at any moment leaves the previous file whole. (Lightning's own writer stages
    the file in $TMPDIR and, when that is another filesystem, copies it over the old checkpoint.)
    torch.save writes to a Python file, so that a full disk is an OSError (ENOSPC: one line naming
    the checkpoint) and not torch's own writer's "unexpected pos"."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        with atomic_file(path) as tmp, open(tmp, "wb") as f:
            torch.save(checkpoint, f)


class LastCheckpoint(Checkpoint):
    """`dirpath/filename` (checkpoints/last.ckpt): always the latest full training state.

    Written every `every_n_steps` optimizer steps (step numbers divisible by it, so a resumed run
    saves where an uninterrupted one would), every `every_n_minutes` minutes, at the end of every
    training epoch (after its validation) and, on SIGTERM or Ctrl-C, after the batch that was running
    (under DDP at the next logging step), after which it raises CtrlC or SIGTERMException, which stop
    training (training/interrupt.py). A kill therefore
    costs at most `every_n_steps` steps or `every_n_minutes` minutes of training. None switches a
    trigger off.
    """

    def __init__(self, dirpath: str, filename: str = "last.ckpt", every_n_steps: int | None = 500,
                 every_n_minutes: float | None = 10.0) -> None:
        if every_n_steps is not None and (not isinstance(every_n_steps, int) or every_n_steps < 1):
            raise ConfigError(f"callbacks.last_checkpoint.every_n_steps must be an integer >= 1 or null, "
                              f"got {every_n_steps!r}")
        if every_n_minutes is not None and (not isinstance(every_n_minutes, int | float) or every_n_minutes <= 0):
            raise ConfigError(f"callbacks.last_checkpoint.every_n_minutes must be > 0 or null, got {every_n_minutes!r}")
        self.path = Path(dirpath) / filename
        self.every_n_steps, self.every_n_minutes = every_n_steps, every_n_minutes
        self._saved_step, self._saved_at = -1, time.monotonic()
        self.written_step: int | None = None  # the step of the last.ckpt this run wrote

    @property
    def state_key(self) -> str:
        return f"LastCheckpoint[{self.path.name}]"

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self._saved_step = trainer.global_step
        self._saved_at = time.monotonic()
        CTRL_C.notice = StopNotice(trainer, self)  # says at once when training will stop
        handle_sigterm_in_training()
        if trainer.is_global_zero and self.path.parent.is_dir():  # left by a process killed while writing
            for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):
                stale.unlink(missing_ok=True)

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, outputs, batch, batch_idx: int) -> None:
        step = trainer.global_step
        urgent = CTRL_C.sigterm or trainer.received_sigterm or CTRL_C.pressed or (
            self.every_n_minutes is not None and time.monotonic() - self._saved_at >= 60 * self.every_n_minutes)
        if trainer.world_size > 1:  # the clock and the signal are per process: all ranks decide together,
            # on logging steps (deciding together waits for the devices: not on every step)
            urgent = logged_step(trainer, step) and trainer.strategy.reduce_boolean_decision(urgent, all=False)
        due = self.every_n_steps is not None and step % self.every_n_steps == 0
        if (due or urgent) and step != self._saved_step:
            self.save(trainer)
        if urgent:
            self.stop_on_signal(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.save(trainer)
        self.stop_on_signal(trainer)

    def stop_on_signal(self, trainer: L.Trainer) -> None:
        """Once the state is saved: raise CtrlC if Ctrl-C was pressed, SIGTERMException if SIGTERM
        was received (on any rank)."""
        pressed, sigterm = CTRL_C.pressed, CTRL_C.sigterm
        if trainer.world_size > 1:
            pressed = trainer.strategy.reduce_boolean_decision(pressed, all=False)
            sigterm = trainer.strategy.reduce_boolean_decision(sigterm, all=False)
        if pressed:
            raise CtrlC
        if sigterm:
            raise SIGTERMException

    def save(self, trainer: L.Trainer) -> None:
        if trainer.fast_dev_run:  # debug=fast writes no checkpoints
            return
        trainer.save_checkpoint(self.path, weights_only=False)  # a full checkpoint (and no log line)
        self._saved_step, self._saved_at = trainer.global_step, time.monotonic()
        self.written_step = trainer.global_step
