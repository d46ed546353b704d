"""Ctrl-C stops a training run after the running batch, with a checkpoint, as SIGTERM does.

Python turns Ctrl-C (SIGINT) into a KeyboardInterrupt wherever the program is; Lightning reports it
and exits with status 1, without a checkpoint. While `ctrl_c_handled()` is active, Ctrl-C instead
- while Lightning trains (`ctrl_c_waits_for_the_batch()`, around trainer.fit) only marks itself
  pressed: LastCheckpoint writes last.ckpt after the running batch and then raises CtrlC, which
  stops trainer.fit (under DDP the ranks decide together, at the end of a batch, as they do on
  SIGTERM: a terminal sends Ctrl-C to every rank, `kill -INT` perhaps to one);
- elsewhere (building the run, preparing data, testing) raises CtrlC at once: nothing to save.
The signal handler itself does no I/O and no collective. Pressing Ctrl-C again while the batch
finishes changes nothing (`kill -9` stops the process at once).
"""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

CTRL_C_EXIT_STATUS = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C stopped


class CtrlC(BaseException):
    """Ctrl-C was pressed: stop. (Not an Exception, so that no `except Exception` on the way takes it
    for an error; not a KeyboardInterrupt, which Lightning reports and turns into exit status 1.)"""


class CtrlCState:
    """This process's Ctrl-C: whether it was pressed, and whether it waits for the running batch."""

    def __init__(self) -> None:
        self.pressed = False
        self.wait_for_batch = False

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.pressed = True
        if not self.wait_for_batch:
            raise CtrlC


CTRL_C = CtrlCState()  # one per process, as signals are


@contextmanager
def ctrl_c_handled() -> Iterator[CtrlCState]:
    """Within the block, Ctrl-C raises CtrlC, or waits for the running batch (see the module)."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield CTRL_C
        return
    CTRL_C.pressed = CTRL_C.wait_for_batch = False
    previous = signal.signal(signal.SIGINT, CTRL_C.handle)
    try:
        yield CTRL_C
    finally:
        signal.signal(signal.SIGINT, previous)
        CTRL_C.pressed = CTRL_C.wait_for_batch = False


@contextmanager
def ctrl_c_waits_for_the_batch() -> Iterator[CtrlCState]:
    """Within the block (training), Ctrl-C only marks itself pressed; CtrlC is raised by LastCheckpoint."""
    CTRL_C.wait_for_batch = True
    try:
        yield CTRL_C
    finally:
        CTRL_C.wait_for_batch = False
