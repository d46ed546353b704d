"""`python run.py ARGS` for many ARGS at the cost of one interpreter's start (tests/e2e/test_quick_refusals.py).

    python tests/refusal_runs.py < cases.json > results.json

cases.json: a list of argument lists. This process imports what run.py imports before its job
(Hydra, OmegaConf and transformer_mt's torch-free modules, not torch), then runs each case in a
process forked from it: run.py run as `__main__` with that sys.argv, its stderr in a file of its own
and its exit status as `python run.py ARGS` gives it (a `sys.exit("text")` prints the text and is 1).
results.json: per case, [exit status, stderr]."""

import json
import os
import runpy
import sys
import tempfile
from pathlib import Path

from hydra.core.plugins import Plugins  # what every case imports and scans: once, here

import transformer_mt.stops  # noqa: F401
import transformer_mt.tasks  # noqa: F401
import transformer_mt.tasks.options.help  # noqa: F401

RUN_PY = str(Path(__file__).resolve().parents[1] / "run.py")


def forked(args: list[str], stderr: str) -> int:
    """`python run.py ARGS` in a forked process, its stderr into the file `stderr`: its exit status."""
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        sys.argv = [RUN_PY, *args]
        try:
            runpy.run_path(RUN_PY, run_name="__main__")
            status = 0
        except SystemExit as done:
            if isinstance(done.code, str):
                print(done.code, file=sys.stderr)
            status = done.code if isinstance(done.code, int) else int(done.code is not None)
        except BaseException:  # noqa: BLE001 - reported as the interpreter would report it
            import traceback

            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def main() -> None:
    Plugins.instance()  # Hydra's scan of its plugins, else in every case
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for n, args in enumerate(json.load(sys.stdin)):
            stderr = os.path.join(folder, f"{n}.err")
            status = forked(args, stderr)
            results.append([status, Path(stderr).read_text(encoding="utf-8", errors="replace")])
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
