"""`python run.py ARGS` for the tests without paying the interpreter's ~10 s of imports each time.

Each pytest worker starts one experiments/gpu/warm.py, the warm process of the GPU script's smoke
runs: it imports torch, Lightning and the rest once and forks a new process per request, with the
test's descriptors 0-2, environment, working directory and argv, run.py run as `__main__`, its own
pid and exit status (warm.py's docstring says what it shares with its siblings: the state right
after those imports). A test's run is `SOCKET.python run.py ARGS`, the executable warm.py writes
beside its socket (experiments/gpu/warm_client.py run as a process: it hands the run to warm.py and
stands for it, its exit status and signals included). `helpers.run_py` uses it unless its environment
differs from the server's in a variable read at import time (helpers.READ_AT_IMPORT), and starts a
plain process then, or where the server did not come up."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_PY = str(ROOT / "run.py")


class Server:
    """experiments/gpu/warm.py, started with environment `env`; `python` runs `python run.py ...`
    forked from it, for the tests that start processes themselves."""

    def __init__(self, env: dict[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="warm-start-")
        self.path = os.path.join(self.folder, "socket")
        self.python = self.path + ".python"  # written by warm.py before it listens
        self.env = env
        with open(os.path.join(self.folder, "warm.log"), "wb") as log:  # what it says, should it not come up
            self.process = subprocess.Popen([sys.executable, str(ROOT / "experiments/gpu/warm.py"), self.path],
                                            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT)

    def ready(self, timeout: float = 180) -> bool:
        """Whether it listens (within `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and not os.path.exists(self.path) and time.monotonic() < deadline:
            time.sleep(0.05)
        return os.path.exists(self.path)

    def run(self, args: list[str], cwd: Path, timeout: float, data: bytes, env: dict[str, str],
            cores: set[int] | None = None) -> subprocess.CompletedProcess:
        """`python run.py ARGS` in `cwd` with environment `env` and `data` on stdin, stdout and stderr
        captured as text (`cores`: the CPU cores it may run on; None: all)."""
        pin = None if cores is None else (lambda: os.sched_setaffinity(0, cores))
        result = subprocess.run([self.python, RUN_PY, *args], cwd=cwd, env=env, input=data, capture_output=True,
                                timeout=timeout, preexec_fn=pin)
        return subprocess.CompletedProcess([sys.executable, RUN_PY, *args], result.returncode,
                                           result.stdout.decode("utf-8", "replace"),
                                           result.stderr.decode("utf-8", "replace"))

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)
