"""run.py's side of warm.py (--smoke on the CPU): start it, hand it a step, close it. Only the
standard library, as run.py."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def log(message: str) -> None:
    """A line of the GPU script's own on stderr (run.py's steps say theirs in their logs)."""
    print(f"[gpu] {message}", file=sys.stderr, flush=True)


class Warm:
    """warm.py, started for --smoke on the CPU: it imports torch, Lightning and the rest once and
    forks each step's process from there (a new process all the same: its own pid, exit status,
    descriptors, environment and argv). `run` is subprocess.run for `python SCRIPT ...` and
    `python -c ...`; None where warm.py did not come up (the steps then run as plain processes)."""

    def __init__(self, work: Path, root: Path) -> None:
        self.root = root
        self.path = str(work / "warm.socket")
        self.output = open(work / "warm.log", "w")  # closed in close()
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("warm.py")), self.path],
                                        cwd=self.root,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdin=subprocess.DEVNULL,
                                        stdout=self.output, stderr=subprocess.STDOUT)

    @classmethod
    def start(cls, work: Path, root: Path, timeout_s: float = 180) -> "Warm | None":
        warm = cls(work, root)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and warm.process.poll() is None and not os.path.exists(warm.path):
            time.sleep(0.05)
        if os.path.exists(warm.path):
            return warm
        warm.close()
        log("warm.py did not come up: each step imports on its own; "
            + " / ".join(Path(warm.output.name).read_text(errors="replace").strip().splitlines()[-3:]))
        return None

    @staticmethod
    def takes(command: list[str]) -> bool:
        return command[0] == sys.executable and len(command) > 1 and (command[1] == "-c" or command[1].endswith(".py"))

    def run(self, command: list[str], env: dict, sink, timeout_s: float) -> int | None:
        """`command` (python ...) in ROOT with `env`, stdout and stderr to `sink`: its exit status, or
        None where warm.py could not start it (it has gone). subprocess.TimeoutExpired after
        timeout_s, the process killed."""
        with open(os.devnull, "rb") as stdin, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            try:
                connection.connect(self.path)
                request = {"argv": command[1:], "cwd": str(self.root), "env": env}
                socket.send_fds(connection, [json.dumps(request).encode()],
                                [stdin.fileno(), sink.fileno(), sink.fileno()])
                connection.settimeout(timeout_s)
                reader = connection.makefile("r")
                pid = int(reader.readline())
            except (OSError, ValueError) as error:
                log(f"warm.py did not take the step ({type(error).__name__}): a plain process instead")
                return None
            try:
                return int(reader.readline() or -1)  # -1: warm.py went before saying it
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(command, timeout_s) from None

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.output.close()
