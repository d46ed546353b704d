"""What a training run says the moment it is asked to stop, and what a second Ctrl-C does.

SIGTERM and Ctrl-C stop training after the running batch, with last.ckpt written (LastCheckpoint);
under DDP the ranks decide together at the next logging step, which may be minutes away on a slow
machine. So that the signal does not look ignored, rank 0 says at once when training will stop:

    Ctrl-C: stopping at the next logging step 200 or the epoch's end, if sooner, with a checkpoint
    (Ctrl-C again to stop now, losing the steps since the last checkpoint)

A second Ctrl-C stops now: rank 0 says what the last checkpoint holds, kills the ranks it started
(Lightning's launcher), and every process exits with status 130 at once (`os._exit`: checkpoints
are written atomically, so none is left half-written). LastCheckpoint makes one StopNotice when
training starts and hands it to the process's Ctrl-C handler (training/interrupt.py).
"""

import os
import signal
import sys
from typing import TYPE_CHECKING, NoReturn

import lightning as L

from transformer_mt.training.interrupt import CTRL_C_EXIT_STATUS

if TYPE_CHECKING:
    from transformer_mt.training.checkpointing import LastCheckpoint

AGAIN = "(Ctrl-C again to stop now, losing the steps since the last checkpoint)"


def say(line: str) -> None:
    """Write `line` to stderr from a signal handler: through sys.stderr, which a rich live display
    prints above itself, or straight to the file descriptor when the signal interrupted a write to
    stderr (a buffered stream refuses a reentrant write)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except RuntimeError:
        os.write(2, (line + "\n").encode())


class StopNotice:
    """The lines of rank 0 when a stop is asked for during training, and the second Ctrl-C, for
    `trainer` and its `last` checkpoint callback."""

    def __init__(self, trainer: L.Trainer, last: "LastCheckpoint") -> None:
        self.trainer, self.last = trainer, last

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
            path, step = self.last.path, self.last.written_step
            if step is not None:
                held = f"{path} holds step {step}: resume with ckpt_path={path}"
            elif path.is_file():
                held = f"resume with ckpt_path={path}"
            else:
                held = "no checkpoint was written"
            say(f"stopped by Ctrl-C at once at step {trainer.global_step}; {held}")
            launcher = trainer.strategy.launcher
            if launcher is not None:
                launcher.kill(signal.SIGKILL)
        if sys.stderr.isatty():
            os.write(2, b"\x1b[?25h")  # the progress bar hid the cursor
        os._exit(CTRL_C_EXIT_STATUS)
