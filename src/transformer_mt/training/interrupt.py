"""Ctrl-C and SIGTERM stop a training run after the running batch, with a checkpoint.

Python turns Ctrl-C (SIGINT) into a KeyboardInterrupt wherever the program is; Lightning reports it
and exits with status 1, without a checkpoint. While `ctrl_c_handled()` is active, Ctrl-C instead
- while Lightning trains (`ctrl_c_waits_for_the_batch()`, around trainer.fit) marks itself
  pressed, and rank 0 says at once when training will stop (training/stop_notice.py):
  LastCheckpoint writes last.ckpt after the running batch and then raises CtrlC, which stops
  trainer.fit (under DDP the ranks decide together at the next logging step: a terminal sends
  Ctrl-C to every rank, `kill -INT` perhaps to one). Ctrl-C again stops the process at once (exit
  status 130), losing the steps since the last checkpoint;
- elsewhere (building the run, preparing data, testing) raises CtrlC at once: nothing to save.
SIGTERM during training (`handle_sigterm`, installed by LastCheckpoint when training starts, in
place of Lightning's handler until fit ends) is marked and said the same way, and LastCheckpoint
raises Lightning's SIGTERMException after the checkpoint. Lightning's own handler broadcasts from
inside the signal handler: under DDP, where every rank gets SIGTERM (and rank 0 forwards it to the
ranks it started), the ranks' collectives then no longer match and training dies with a gloo
error. These handlers do no collective.
"""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn, Protocol

CTRL_C_EXIT_STATUS = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C stopped


class CtrlC(BaseException):
    """Ctrl-C was pressed: stop. (Not an Exception, so that no `except Exception` on the way takes it
    for an error; not a KeyboardInterrupt, which Lightning reports and turns into exit status 1.)"""


class Notice(Protocol):
    """What Ctrl-C says and does during training (training/stop_notice.py's StopNotice)."""

    def stopping(self, by: str) -> None: ...

    def stop_now(self) -> NoReturn: ...


class CtrlCState:
    """This process's stop signals: whether Ctrl-C was pressed and SIGTERM received, whether Ctrl-C
    waits for the running batch, and during training what they say (`notice`, set when training
    starts)."""

    def __init__(self) -> None:
        self.pressed = self.sigterm = False
        self.wait_for_batch = False
        self.notice: Notice | None = None

    def reset(self) -> None:
        self.pressed = self.sigterm = self.wait_for_batch = False
        self.notice = None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        again, self.pressed = self.pressed, True
        if not self.wait_for_batch:
            raise CtrlC
        if self.notice is not None and again:
            self.notice.stop_now()
        elif self.notice is not None:
            self.notice.stopping("Ctrl-C")

    def handle_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """During training: mark SIGTERM received (the first one says so on rank 0)."""
        again, self.sigterm = self.sigterm, True
        if self.notice is not None and not again:
            self.notice.stopping("SIGTERM")


CTRL_C = CtrlCState()  # one per process, as signals are


@contextmanager
def ctrl_c_handled() -> Iterator[CtrlCState]:
    """Within the block, Ctrl-C raises CtrlC, or waits for the running batch (see the module)."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield CTRL_C
        return
    CTRL_C.reset()
    previous = signal.signal(signal.SIGINT, CTRL_C.handle)
    try:
        yield CTRL_C
    finally:
        signal.signal(signal.SIGINT, previous)
        CTRL_C.reset()


def handle_sigterm_in_training() -> None:
    """SIGTERM handled by `CTRL_C.handle_sigterm` (called when training starts, after Lightning put
    its own handler in place, which it restores when fit ends)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, CTRL_C.handle_sigterm)


@contextmanager
def ctrl_c_waits_for_the_batch() -> Iterator[CtrlCState]:
    """Within the block (training), Ctrl-C only marks itself pressed; CtrlC is raised by LastCheckpoint."""
    CTRL_C.wait_for_batch = True
    try:
        yield CTRL_C
    finally:
        CTRL_C.wait_for_batch = False
        CTRL_C.notice = None
