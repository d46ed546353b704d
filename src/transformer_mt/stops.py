"""A process stopped by a signal: the exit statuses a shell reports (130 for Ctrl-C, 143 for SIGTERM),
and a block in which SIGTERM raises `Terminated` as Ctrl-C raises KeyboardInterrupt, so that the
code that was stopped can say in one line how far it got (a pipeline's synthetic stage, the server)."""

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

CTRL_C_EXIT_STATUS = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C stopped
SIGTERM_EXIT_STATUS = 143  # 128 + SIGTERM


class Terminated(BaseException):
    """SIGTERM arrived (a BaseException: no `except Exception` takes it)."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """A block in which SIGTERM raises Terminated (as Ctrl-C raises KeyboardInterrupt), so that a
    stop is one line, not the shell's `Terminated`; the handler before it is put back after."""
    def terminated(signum: int, frame: FrameType | None) -> None:
        raise Terminated

    before = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def stopped_by(stop: BaseException) -> tuple[str, int]:
    """(SIGTERM, 143) for Terminated, (Ctrl-C, 130) for KeyboardInterrupt."""
    return ("SIGTERM", SIGTERM_EXIT_STATUS) if isinstance(stop, Terminated) else ("Ctrl-C", CTRL_C_EXIT_STATUS)
