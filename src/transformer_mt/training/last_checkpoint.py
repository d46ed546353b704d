"""`last.ckpt` kept current, and stopping on Ctrl-C or SIGTERM with it: the one module for both.

LastCheckpoint writes checkpoints/last.ckpt on a step and time schedule, and owns how a training
run stops when asked to. Python turns Ctrl-C (SIGINT) into a KeyboardInterrupt wherever the program
is; Lightning reports it and exits with status 1, without a checkpoint. Instead:
- outside training (building the run, preparing data, testing), Ctrl-C raises CtrlC and SIGTERM
  Terminated at once (stops.py's `stop_signals()`, around the whole process): nothing to save;
- while Lightning trains (from LastCheckpoint's on_train_start to its on_train_end), Ctrl-C and
  SIGTERM only mark themselves (`StopSignals`, the callback's state), and rank 0 says at once when
  training will stop (`StopNotice`):

      Ctrl-C: stopping at the next logging step 200 or the epoch's end, if sooner, with a checkpoint
      (Ctrl-C again to stop now, losing the steps since the last checkpoint)

  LastCheckpoint writes last.ckpt after the running batch (under DDP the ranks decide together at
  the next logging step: a terminal sends Ctrl-C to every rank, `kill -INT` perhaps to one) and then
  raises CtrlC, or Lightning's SIGTERMException, which stop trainer.fit. A second Ctrl-C stops at
  once: rank 0 says what the last checkpoint holds, kills the ranks it started, and every process
  exits with status 130 (`os._exit`: checkpoints are written atomically, none is left half-written).
Lightning's own SIGTERM handler broadcasts from inside the signal handler: under DDP, where every
rank gets SIGTERM, the ranks' collectives then no longer match and training dies with a gloo error.
These handlers do no collective. Every message that says how to go on uses `resume_hint`.
"""

import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import NoReturn

import lightning as L
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException

from transformer_mt.stops import CTRL_C_EXIT_STATUS, CtrlC, say
from transformer_mt.training.steps import logged_step


def exit_status(trainer: L.Trainer, status: int) -> int:
    """A stopped process's exit status: `status` for the first process of each node, 0 for the others
    (Lightning's launcher watches those it started: one that ends with a non-zero status makes it
    SIGKILL the first, which would lose that one's last line and status, the run's)."""
    return status if trainer.local_rank == 0 else 0


AGAIN = "(Ctrl-C again to stop now, losing the steps since the last checkpoint)"


def resume_hint(path: Path | None, step: int | None = None, rerun: str | None = None) -> str:
    """What a stopped run says of its last checkpoint: `PATH holds step N: resume with
    ckpt_path=PATH`, or that none was written; `rerun` (a pipeline's stage: the command that goes
    on with it) in place of ckpt_path."""
    if rerun:
        held = f"{path} holds step {step}; " if path is not None and path.is_file() and step is not None else ""
        return f"{held}go on with {rerun}"
    if path is None or not path.is_file():
        return "no checkpoint was written"
    held = f"{path} holds step {step}: " if step is not None else ""
    return f"{held}resume with ckpt_path={path}"


class StopNotice:
    """The lines of rank 0 when a stop is asked for during training, and the second Ctrl-C."""

    def __init__(self, trainer: L.Trainer, path: Path, rerun: str | None = None) -> None:
        self.trainer, self.path, self.rerun = trainer, path, rerun
        self.written_step: int | None = None  # the step of the last.ckpt this run wrote

    def when(self) -> str:
        """When training will stop, as LastCheckpoint decides it."""
        trainer = self.trainer
        if trainer.world_size == 1:
            return "after the running batch"
        every = trainer.log_every_n_steps
        if every <= 0:
            return "at the end of the epoch"
        return f"at the next logging step {(trainer.global_step // every + 1) * every} or the epoch's end, if sooner"

    def stopping(self, by: str) -> None:
        """Rank 0's line the moment `by` (Ctrl-C or SIGTERM) arrives."""
        if self.trainer.is_global_zero:
            say(f"{by}: stopping {self.when()}, with a checkpoint{' ' + AGAIN if by == 'Ctrl-C' else ''}")

    def stop_now(self) -> NoReturn:
        """A second Ctrl-C: one line on rank 0, the ranks this process started killed, exit 130."""
        trainer = self.trainer
        if trainer.is_global_zero:
            hint = resume_hint(self.path, self.written_step, self.rerun)
            say(f"stopped by Ctrl-C at once at step {trainer.global_step}; {hint}")
            launcher = trainer.strategy.launcher
            if launcher is not None:
                launcher.kill(signal.SIGKILL)
        if sys.stderr.isatty():
            os.write(2, b"\x1b[?25h")  # the progress bar hid the cursor
        os._exit(exit_status(trainer, CTRL_C_EXIT_STATUS))


class StopSignals:
    """Whether Ctrl-C was pressed and SIGTERM received during training, and their handlers: the
    first of each marks and says (`notice`), a second Ctrl-C stops at once."""

    def __init__(self, notice: StopNotice) -> None:
        self.notice, self.pressed, self.sigterm = notice, False, False
        self.previous: dict[int, object] = {}

    def on_ctrl_c(self, signum: int, frame: FrameType | None) -> None:
        again, self.pressed = self.pressed, True
        if again:
            self.notice.stop_now()
        self.notice.stopping("Ctrl-C")

    def on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        again, self.sigterm = self.sigterm, True
        if not again:
            self.notice.stopping("SIGTERM")

    def install(self) -> None:
        """Handle SIGINT and SIGTERM (Lightning put its own SIGTERM handler in place before; it
        restores it when fit ends)."""
        if threading.current_thread() is threading.main_thread():
            self.previous = {signal.SIGINT: signal.signal(signal.SIGINT, self.on_ctrl_c),
                             signal.SIGTERM: signal.signal(signal.SIGTERM, self.on_sigterm)}

    def uninstall(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}


class LastCheckpoint(Checkpoint):
    """`dirpath/filename` (checkpoints/last.ckpt): always the latest full training state.

    Written every `every_n_steps` optimizer steps (step numbers divisible by it, so a resumed run
    saves where an uninterrupted one would), every `every_n_minutes` minutes, at the end of every
    training epoch (after its validation) and, on SIGTERM or Ctrl-C, after the batch that was running
    (under DDP at the next logging step), after which it raises CtrlC or SIGTERMException, which stop
    training. A kill therefore costs at most `every_n_steps` steps or `every_n_minutes` minutes of
    training. None switches a trigger off. `rerun`: what a stop says to go on with, in place of
    ckpt_path=PATH (a pipeline's training stage: the pipeline's command).
    """

    def __init__(self, dirpath: str, filename: str = "last.ckpt", every_n_steps: int | None = 500,
                 every_n_minutes: float | None = 10.0, rerun: str | None = None) -> None:
        self.path, self.rerun = Path(dirpath) / filename, rerun
        self.every_n_steps, self.every_n_minutes = every_n_steps, every_n_minutes
        self._saved_step, self._saved_at = -1, time.monotonic()
        self.signals: StopSignals | None = None  # while training
        self.trained = False  # training ended (on_train_end): a stop now comes after it

    @property
    def state_key(self) -> str:
        return f"LastCheckpoint[{self.path.name}]"

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self._saved_step = trainer.global_step
        self._saved_at = time.monotonic()
        self.signals = StopSignals(StopNotice(trainer, self.path, self.rerun))
        self.signals.install()
        if trainer.is_global_zero and self.path.parent.is_dir():  # left by a process killed while writing
            for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):
                stale.unlink(missing_ok=True)

    def on_train_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        """Training is over: a stop asked for after the last batch stops the run here; from now on
        Ctrl-C raises CtrlC at once again."""
        asked = self.asked()
        self.uninstall()
        self.trained = True
        self.stop_on_signal(trainer, asked)

    def on_exception(self, trainer: L.Trainer, module: L.LightningModule, exception: BaseException) -> None:
        self.uninstall()

    def uninstall(self) -> None:
        if self.signals is not None:
            self.signals.uninstall()
        self.signals = None

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, outputs, batch, batch_idx: int) -> None:
        step, asked = trainer.global_step, self.asked()
        urgent = any(asked) or trainer.received_sigterm or (
            self.every_n_minutes is not None and time.monotonic() - self._saved_at >= 60 * self.every_n_minutes)
        if trainer.world_size > 1:  # the clock and the signal are per process: all ranks decide together,
            # on logging steps (deciding together waits for the devices: not on every step)
            urgent = logged_step(trainer, step) and trainer.strategy.reduce_boolean_decision(urgent, all=False)
        due = self.every_n_steps is not None and step % self.every_n_steps == 0
        if (due or urgent) and step != self._saved_step:
            self.save(trainer)
        if urgent:
            self.stop_on_signal(trainer, asked)

    def on_train_epoch_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.save(trainer)
        self.stop_on_signal(trainer, self.asked())

    def asked(self) -> tuple[bool, bool]:
        """(Ctrl-C pressed, SIGTERM received) in this process."""
        return (self.signals.pressed, self.signals.sigterm) if self.signals else (False, False)

    def stop_on_signal(self, trainer: L.Trainer, asked: tuple[bool, bool]) -> None:
        """Once the state is saved: raise CtrlC if Ctrl-C was pressed, SIGTERMException if SIGTERM
        was received (on any rank)."""
        pressed, sigterm = asked
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
        if self.signals is not None:
            self.signals.notice.written_step = trainer.global_step
