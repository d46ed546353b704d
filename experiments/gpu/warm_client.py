"""The clients' side of warm.py: run.py's (--smoke on the CPU: start it, hand it a step, close it),
and the `python` of the processes it forks (`main`). Only the standard library, as run.py.

    python experiments/gpu/warm_client.py SOCKET run.py ARGS

is `python run.py ARGS` forked from the warm.py listening on SOCKET, on this process's CPU cores:
its descriptors 0-2, working directory and environment are this process's, the signals this process
gets are passed on, and its exit status (a signal's included) is this process's; the same for
submitit's job processes (`python -u -m submitit.core._submit`) and the scripts of experiments/. Any
other command (a compile worker, say) is the plain interpreter's. SOCKET.python, written by warm.py
as it starts, is an executable that runs it, the `sys.executable` of the processes warm.py forks, so
that a process they start in turn (Lightning's DDP ranks, a submitit job) is forked too; the tests
run theirs with it (tests/warm_start.py)."""

import io
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

    def __init__(self, root: Path, path: str, process: subprocess.Popen | None = None, output=None) -> None:
        """The warm.py listening on `path`; `process` and its log `output` when this one started it
        (else it is left running at close: GPU_RUN_WARM, the tests' own)."""
        self.root, self.path, self.process, self.output = root, path, process, output

    @classmethod
    def start(cls, work: Path, root: Path, timeout_s: float = 180) -> "Warm | None":
        path = str(work / "warm.socket")
        output = open(work / "warm.log", "w")  # closed in close()
        process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("warm.py")), path], cwd=root,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdin=subprocess.DEVNULL,
                                   stdout=output, stderr=subprocess.STDOUT)
        warm = cls(root, path, process, output)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and process.poll() is None and not os.path.exists(path):
            time.sleep(0.05)
        if os.path.exists(path):
            return warm
        warm.close()
        log("warm.py did not come up: each step imports on its own; "
            + " / ".join(Path(output.name).read_text(errors="replace").strip().splitlines()[-3:]))
        return None

    @staticmethod
    def takes(command: list[str]) -> bool:
        return command[0] == sys.executable and len(command) > 1 and (command[1] == "-c" or command[1].endswith(".py"))

    def run(self, command: list[str], env: dict, sink, timeout_s: float) -> int | None:
        """`command` (python ...) in ROOT with `env`, stdout and stderr to `sink`: its exit status, or
        None where warm.py could not start it (it has gone). subprocess.TimeoutExpired after
        timeout_s, the process killed."""
        with open(os.devnull, "rb") as stdin:
            try:
                connection, reader, pid = start(self.path, command[1:], str(self.root), env,
                                                [stdin.fileno(), sink.fileno(), sink.fileno()])
            except (OSError, ValueError) as error:
                log(f"warm.py did not take the step ({type(error).__name__}): a plain process instead")
                return None
        return wait(connection, reader, pid, command, timeout_s)

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.output.close()


def wait(connection: socket.socket, reader: io.TextIOWrapper, pid: int, command: list[str], timeout_s: float) -> int:
    """The exit status of the process `start` forked (-1: warm.py went before saying it);
    subprocess.TimeoutExpired after timeout_s, the process killed. The connection is closed."""
    with connection:
        connection.settimeout(timeout_s)
        try:
            return int(reader.readline() or -1)
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired(command, timeout_s) from None


def start(path: str, argv: list[str], cwd: str, env: dict, fds: list[int], **extra
          ) -> tuple[socket.socket, io.TextIOWrapper, int]:
    """Have the warm.py listening on `path` fork `python ARGV` with descriptors `fds` as 0-2 (and
    `extra`: "cores" to run on, "python" for its sys.executable): the connection, its reader, from
    which its exit status comes as a line, and its pid."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
        request = {"argv": argv, "cwd": cwd, "env": env, **extra}
        socket.send_fds(connection, [json.dumps(request).encode()], fds)
        reader = connection.makefile("r")
        return connection, reader, int(reader.readline())
    except BaseException:
        connection.close()
        raise


TAKES = ("run.py", "-m submitit.core._submit")  # the commands forked (the others need more than descriptors 0-2)
EXPERIMENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # and the scripts of experiments/


def taken(command: list[str]) -> bool:
    """Whether `python COMMAND` is forked: run.py, submitit's job, a script of experiments/."""
    script = os.path.abspath(command[0]) if command and command[0].endswith(".py") else ""
    return bool(command) and (os.path.basename(command[0]) == "run.py" or " ".join(command[:2]) in TAKES
                              or script.startswith(EXPERIMENTS + os.sep))


def main(path: str, argv: list[str]) -> None:
    """`python ARGV`, forked from the warm.py on `path` if it is `taken` (after an -u) and warm.py is
    there, on this process's cores (as a process it started would be)."""
    unbuffered = argv[:1] == ["-u"]
    command = argv[1:] if unbuffered else argv
    if not taken(command):
        os.execv(sys.executable, [sys.executable, *argv])
    try:
        connection, reader, _ = start(path, command, os.getcwd(), dict(os.environ), [0, 1, 2],
                                      python=path + ".python", unbuffered=unbuffered,
                                      cores=sorted(os.sched_getaffinity(0)))
    except (OSError, ValueError):
        os.execv(sys.executable, [sys.executable, *argv])
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(number, lambda n, _: connection.sendall(f"{n}\n".encode()))
    line = reader.readline()
    status = int(line) if line.strip() else 1  # warm.py gone before saying it
    if status < 0:  # ended by a signal: so does this process
        if -status != signal.SIGKILL:  # SIGKILL has no handler to reset: it ends this process as it is
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
