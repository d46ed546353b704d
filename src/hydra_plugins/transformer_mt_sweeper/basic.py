"""Hydra's basic sweeper (`python run.py -m ...`), made to end a sweep with failed jobs in one line.

Hydra's own sweeper stops at the end of the first batch with a failed job and prints that job's
traceback. This one runs every job; each failed job has said why as it failed (one line `error:
job N (...): ...` for a user's mistake, the traceback for anything else; and error.txt in its run
directory), and the sweep ends with one line, `error: K of N jobs failed ...`, and exit status 1.
"""

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Hydra's default sweeper: Hydra 1.3 offers it only from hydra._internal (no public module holds it);
# this plugin extends it rather than copy its sweep expansion and batching
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.utils import JobReturn, JobStatus


class KeepFailures:
    """A launcher's stand-in for the sweeper: it launches through `launcher` and hands back only
    the jobs that finished, keeping the failed ones in `failed` (so the sweep goes on)."""

    def __init__(self, launcher) -> None:
        self.launcher = launcher
        self.failed: list[JobReturn] = []

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        results = self.launcher.launch(job_overrides, initial_job_idx=initial_job_idx)
        self.failed += [r for r in results if r.status == JobStatus.FAILED]
        return [r for r in results if r.status != JobStatus.FAILED]


class SummarizingSweeper(BasicSweeper):
    """Hydra's basic sweeper (same options) that runs every job and ends with one line if any failed."""

    def setup(self, **kwargs: Any) -> None:
        super().setup(**kwargs)
        self.launcher = KeepFailures(self.launcher)

    def sweep(self, arguments: list[str]) -> Any:
        returns = super().sweep(arguments)
        failed = self.launcher.failed
        if failed:
            total = len(failed) + sum(len(batch) for batch in returns)
            jobs = ", ".join(str(r.hydra_cfg.hydra.job.num) for r in failed)
            print(f"error: {len(failed)} of {total} jobs failed (job {jobs}); each one's reason is in error.txt in "
                  f"its run directory under {Path(self.config.hydra.sweep.dir)}", file=sys.stderr)
            sys.exit(1)  # as a single run that fails: the line above is the last word, not Hydra's
        return returns
