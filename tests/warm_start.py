"""`python run.py ARGS` for the tests without paying the interpreter's ~10 s of imports each time.

Each pytest worker starts one experiments/gpu/warm.py, the warm process of the GPU script's smoke
runs: it imports torch, Lightning and the rest once and forks a new process per request, with the
test's descriptors 0-2, environment, working directory and argv, run.py run as `__main__`, its own
pid and exit status (warm.py's docstring says what it shares with its siblings: the state right
after those imports). `helpers.run_py` uses it unless its environment differs from the server's
in a variable read at import time (helpers.READ_AT_IMPORT), and starts a plain process then, or
where the server did not come up."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments.gpu import warm_client  # the GPU script's client of warm.py (a namespace package)

ROOT = Path(__file__).resolve().parents[1]
RUN_PY = str(ROOT / "run.py")


class Server:
    """experiments/gpu/warm.py, started with environment `env`; `python` runs `python run.py ...`
    forked from it (experiments/gpu/warm_client.py), for the tests that start processes themselves."""

    def __init__(self, env: dict[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="warm-start-")
        self.path = os.path.join(self.folder, "socket")
        self.python = warm_client.start_python(self.path)
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
        with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            stdin.write(data)
            stdin.seek(0)
            connection, reader, pid = warm_client.start(
                self.path, [RUN_PY, *args], str(cwd), env, [stdin.fileno(), out.fileno(), err.fileno()],
                python=self.python, cores=sorted(cores) if cores else None)
            status = warm_client.wait(connection, reader, pid, [RUN_PY, *args], timeout)
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess([sys.executable, RUN_PY, *args], status,
                                               out.read().decode("utf-8", "replace"),
                                               err.read().decode("utf-8", "replace"))

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)
