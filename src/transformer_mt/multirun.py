"""What a job of a Hydra multirun needs beyond a single run: DDP ranks that run the job, not the
sweep, and a failure that is recorded in the job's directory while the sweep goes on.

Lightning starts DDP ranks 1..N-1 by running this script again with the parent's arguments; in a
multirun those are the sweep's (`-m model.heads=1,2 ...`), so every rank would start the whole
sweep. The job therefore tells its ranks (environment variable JOB_ENV) its own overrides and run
directory, and `child_argv` turns a rank's arguments into exactly that job.
"""

import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

JOB_ENV = "TRANSFORMER_MT_JOB"
FAILURE_FILE = "error.txt"  # in a failed job's run directory: one line, why


def child_argv(argv: list[str], environ: Mapping[str, str]) -> list[str]:
    """For a DDP rank > 0 started by a multirun job: the job's overrides and run directory (keeping
    the job name Lightning gives the rank); otherwise `argv` unchanged."""
    job = environ.get(JOB_ENV)
    if not job or environ.get("LOCAL_RANK", "0") == "0":
        return argv
    spec = json.loads(job)
    names = [a for a in argv[1:] if a.startswith("hydra.job.name=")]
    return [argv[0], *spec["overrides"], f"hydra.run.dir={spec['dir']}", "hydra.output_subdir=null", *names]


def announce_job(overrides: list[str], run_dir: str) -> None:
    """Tell the DDP ranks this process is about to start which job they belong to."""
    os.environ[JOB_ENV] = json.dumps({"overrides": list(overrides), "dir": run_dir})


def record_failure(run_dir: str, err: BaseException) -> str:
    """Write why a job failed to its run directory (read by task=report; not if the disk is full);
    return the line."""
    line = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}".rstrip(": ")
    path = Path(run_dir) / FAILURE_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(line + "\n", encoding="utf-8")
    except OSError:
        pass
    return line


def report_failure(run_dir: str, err: BaseException, user_error: BaseException | None) -> None:
    """A failed job says why (called while handling `err`): in error.txt in its run directory, and on
    stderr in one line `error: job N (overrides): ...` for a user's mistake (`user_error`), with the
    traceback for anything else. The sweep goes on; hydra_plugins/transformer_mt_sweeper/basic.py
    ends it with one line counting the failed jobs."""
    from hydra.core.hydra_config import HydraConfig

    line = record_failure(run_dir, user_error or err)
    hydra = HydraConfig.get()
    job = f"job {hydra.job.num} ({' '.join(hydra.overrides.task)})"
    if user_error is not None:
        print(f"error: {job}: {user_error}", file=sys.stderr)
    else:
        log.exception("%s failed: %s", job, line)


@contextmanager
def isolated_job() -> Iterator[None]:
    """A multirun runs its jobs one after another in one process. What Lightning's DDP leaves
    behind, the process group and the environment variables (LOCAL_RANK, MASTER_PORT, ...) that
    would make the next job join the old group as if it were a child, is undone after each job."""
    environ = dict(os.environ)
    try:
        yield
    finally:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        for key in set(os.environ) - set(environ):
            del os.environ[key]
        os.environ.update(environ)
