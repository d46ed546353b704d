"""Progress bars for long work outside the training loop: translating, preparing data (reading,
tokenizer training, encoding), averaging and exporting checkpoints.

rich's progress on stderr (never on stdout, where translations go), with the count, the rate and
the time left. The top-level `progress` key decides: null (default) draws a bar when stderr is a
terminal and the work lasts more than a second (short work stays quiet), true always draws one
(also into a log file), false never. A bar is removed once its work is done: the log lines say
what was done.
"""

import sys
import threading
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from transformer_mt.validate import check

DELAY = 1.0  # seconds of work before a bar appears when it was not asked for


def wanted(setting: bool | None) -> bool:
    """Whether bars are drawn: `setting` (the `progress` key), or, when null, whether stderr is a terminal."""
    check("progress", setting, lambda value: isinstance(value, bool), "true, false or null", nullable=True)
    return sys.stderr.isatty() if setting is None else bool(setting)


class RateColumn(ProgressColumn):
    """The recent rate, e.g. "1,250 lines/s"."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.0f} {self.unit}/s", style="progress.data.speed")


class ProgressBar:
    """One bar, used as a context manager: `advance(n)` as work is done. `total` None: a spinner with
    the elapsed time (work whose size is unknown). With `setting` null the bar appears after DELAY
    seconds of work, and only when stderr is a terminal; with true at once; with false never."""

    def __init__(self, description: str, total: int | None, unit: str, setting: bool | None) -> None:
        self.description, self.total, self.unit = description, total, unit
        self.enabled = wanted(setting)
        self.delay = DELAY if setting is None else 0.0
        self.done = 0
        self.progress: Progress | None = None
        self.timer = threading.Timer(self.delay, self._show)
        self.timer.daemon = True

    def __enter__(self) -> "ProgressBar":
        if self.enabled:
            self.timer.start()
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.timer.cancel()
        if self.timer.is_alive():  # drawing the bar just now: wait, then remove it
            self.timer.join()
        if self.progress is not None:  # the final count, also where work advanced while the bar was being drawn
            self.progress.update(self.progress.task_ids[0], completed=self.done, refresh=True)
            self.progress.stop()

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.progress is not None:
            self.progress.update(self.progress.task_ids[0], completed=self.done)

    def _show(self) -> None:
        console = Console(stderr=True, force_terminal=True if not sys.stderr.isatty() else None)
        if self.total is None:
            columns = [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
        else:
            columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(self.unit),
                       TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn()]
        progress = Progress(*columns, console=console, transient=True, redirect_stdout=False)
        progress.add_task(self.description, total=self.total, completed=self.done)
        progress.start()
        self.progress = progress
