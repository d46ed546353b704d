"""A process stopped by a signal: one rule wherever the stop lands.

Within `stop_signals()` (run.py puts it around everything it runs) Ctrl-C (SIGINT) raises CtrlC and
SIGTERM raises Terminated in the main thread, so that the code that was running unwinds (temporary
files removed, locks released) and the layer that knows how far the run got says so in one line,
`stopped by Ctrl-C ...` or `stopped by SIGTERM ...`, and exits with the status a shell reports (130,
143): `exit_stopped`. Training takes both signals over while it fits (training/last_checkpoint.py:
the running batch is finished and a checkpoint written first), uvicorn while it serves (it finishes
the requests in flight and raises the signal again).

The first stop is noted: where its exception was swallowed on the way (a finalizer, a library's
broad `except`), `raise_requested()` raises it again, and the task runner ends with the stop's line
and status, never 0. A second signal while the first unwinds stops at once (one line, `os._exit`).

A SIGINT that the shell ignored when it started the process (a background job of a script: `cmd &`
in a non-interactive shell) is handled all the same: `kill -INT` stops a run started so as Ctrl-C
stops one started from a terminal (one rule, said in docs/faults.md)."""

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

CTRL_C_EXIT_STATUS = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C stopped
SIGTERM_EXIT_STATUS = 143  # 128 + SIGTERM


class CtrlC(BaseException):
    """Ctrl-C was pressed (SIGINT): stop. (Not an Exception, so that no `except Exception` on the way
    takes it for an error; not a KeyboardInterrupt, which Lightning reports and turns into exit status 1.)"""


class Terminated(BaseException):
    """SIGTERM arrived (a BaseException: no `except Exception` takes it)."""


STOPS = (CtrlC, Terminated, KeyboardInterrupt)  # what a stop signal raises (KeyboardInterrupt: outside run.py)


def say(line: str) -> None:
    """Write `line` to stderr, also from a signal handler: through sys.stderr, which a rich live
    display prints above itself, or straight to the file descriptor when the signal interrupted a
    write to stderr (a buffered stream refuses a reentrant write)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except RuntimeError:
        os.write(2, (line + "\n").encode())


def stopped_by(stop: BaseException | int) -> tuple[str, int]:
    """(SIGTERM, 143) for Terminated or SIGTERM, (Ctrl-C, 130) for the others."""
    sigterm = stop == signal.SIGTERM if isinstance(stop, int) else isinstance(stop, Terminated)
    return ("SIGTERM", SIGTERM_EXIT_STATUS) if sigterm else ("Ctrl-C", CTRL_C_EXIT_STATUS)


class StopRequests:
    """The stop signals this process received within stop_signals(): the first raises, a second
    while the first unwinds ends the process at once."""

    def __init__(self) -> None:
        self.first: int | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.first is not None:
            by, status = stopped_by(signum)
            say(f"stopped by {by} at once (a second stop while the first one was being handled)")
            os._exit(status)
        self.first = signum
        raise Terminated if signum == signal.SIGTERM else CtrlC

    def requested(self) -> BaseException | None:
        """The exception of the stop received (None: none)."""
        if self.first is None:
            return None
        return Terminated() if self.first == signal.SIGTERM else CtrlC()


REQUESTS = StopRequests()


@contextmanager
def stop_signals() -> Iterator[None]:
    """A block in which SIGINT raises CtrlC and SIGTERM raises Terminated (whatever handled them
    before, an ignored SIGINT included); the handlers before it are put back after."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    previous = {signum: signal.signal(signum, REQUESTS.handler) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def raise_requested() -> None:
    """Raise the stop this process received, if one was (its exception swallowed on the way)."""
    stop = REQUESTS.requested()
    if stop is not None:
        raise stop


def exit_stopped(stop: BaseException, what: str) -> NoReturn:
    """One line, `stopped by Ctrl-C|SIGTERM WHAT`, and the stop's exit status (130 / 143)."""
    by, status = stopped_by(stop)
    say(f"stopped by {by}{'' if what[:1] in ':;,' else ' '}{what}")
    if sys.stderr.isatty():
        os.write(2, b"\x1b[?25h")  # a progress bar may have hidden the cursor
    sys.exit(status)


@contextmanager
def stops_say(what) -> Iterator[None]:
    """A stop within the block ends the process with one line: `stopped by ... what()` (`what`: a
    function of no arguments, called at the stop, for how far the block got)."""
    try:
        yield
    except STOPS as stop:
        exit_stopped(stop, what())
