"""The steps of `run.py --smoke --device cpu` without paying the interpreter's imports in each one
(torch, Lightning, which imports torch._dynamo and torchmetrics, which imports transformers and
scipy: about 10 s a process, most of a smoke step's time).

    python experiments/gpu/warm.py SOCKET

It imports what the steps import, then listens on the Unix socket SOCKET. For each request (a
command `python SCRIPT ARGS`, `python -m MODULE ARGS` or `python -c CODE ARGS`, its working
directory and environment, and the file descriptors 0-2 to give it) it forks a manager that forks
the step's process, says its pid, passes on the signals the client names (killing the step should
the client go first), waits for it and says its exit status. The step's process is a new one, as
`python ...` would start: its own pid, exit status and descriptors 0-2, its environment
(TORCH_LOGS read again), working directory, sys.argv, sys.path[0] and `__main__`, and the
interpreter's exit (its threads joined, atexit handlers run, streams flushed; only the teardown of
its modules, seconds with torch loaded, is left out). What it shares with the other steps is the
state right after those imports, nothing a step has done. Its sys.executable is the "python" the
request names (warm_client.py's, which forks the processes it starts in turn from here too).
It ends when the process that started it (run.py) has gone.

run.py (`Warm`) starts it only with --smoke on the CPU, and runs the steps as plain processes
when it does not come up; on a GPU every step is a plain process. The tests start one per pytest
worker for their `python run.py` processes (tests/warm_start.py), and their DDP ranks and
submitit jobs come from it too.
"""

import atexit
import contextlib
import gc
import importlib
import io
import json
import logging
import os
import runpy
import select
import shlex
import signal
import socket
import sys
import threading
import types

# what the steps import: train_speed.py (its HF peer, and torch.compile's aot_eager with --compile),
# loss_speed.py, attention_speed.py, decode_speed.py and run.py's jobs
PRELOAD = ("torch", "torch._dynamo", "lightning.pytorch", "hydra.core.plugins", "datasets", "sacrebleu",
           "transformers.models.marian.modeling_marian", "ctranslate2", "torch.profiler",
           "torch._dynamo.backends.debugging", "torch._inductor.compile_fx", "transformer_mt.tasks",
           "transformer_mt.tasks.train", "transformer_mt.tasks.evaluate", "transformer_mt.checkpoints.loading",
           "transformer_mt.interop.marian", "transformer_mt.interop.ctranslate2")


def preload() -> None:
    """Import PRELOAD; a module that fails to import is left to the step that needs it (its own error).
    A root handler for the while: Lightning then leaves its logger to propagate, as it does when a
    job's Hydra logging is set up before it is imported."""
    root, quiet = logging.getLogger(), logging.NullHandler()
    root.addHandler(quiet)
    try:
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the step that imports it reports the error
                continue
        try:
            from hydra.core.plugins import Plugins

            Plugins.instance()  # Hydra's scan of its plugins, on first use otherwise
        except Exception:  # noqa: BLE001 - the steps scan on their own then
            pass
    finally:
        root.removeHandler(quiet)


def write_python(path: str) -> None:
    """PATH.python: the `python` of the processes forked here, warm_client.py's `main` (its docstring)."""
    client = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm_client.py")
    with open(path + ".python", "w") as script:
        script.write(f"#!/bin/sh\nexec {' '.join(map(shlex.quote, (sys.executable, client, path)))} \"$@\"\n")
    os.chmod(path + ".python", 0o755)


def serve(path: str) -> None:
    """Import, then fork a manager per connection; end when the process that started this one has."""
    parent = os.getppid()
    preload()
    gc.freeze()  # the imports' objects (about half a million) never scanned again, in any fork
    write_python(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".part")
    server.listen(8)
    os.rename(path + ".part", path)  # there once it listens
    server.settimeout(1.0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # managers are reaped as they end
    while os.getppid() == parent:
        try:
            connection, _ = server.accept()
        except TimeoutError:
            continue
        if os.fork() == 0:
            server.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            manage(connection)
        connection.close()


def manage(connection: socket.socket) -> None:
    """Fork the step's process, say its pid, pass on the signals the client names (a line each),
    kill the step should the client go first, say the step's exit status."""
    try:
        connection.settimeout(None)
        message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
        request = json.loads(message)
        pid = os.fork()
    except BaseException:
        os._exit(1)
    if pid == 0:
        connection.close()
        run_step(request, fds)
    try:
        for fd in fds:
            os.close(fd)
        connection.sendall(f"{pid}\n".encode())
        watch(connection, os.pidfd_open(pid))
        _, status = os.waitpid(pid, 0)
        connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    finally:
        os._exit(0)


def watch(connection: socket.socket, step: int) -> None:
    """Until the step's process (pidfd `step`) ends: each line from the client is a signal's number
    to send it; the client gone (a SIGKILL, say) kills it."""
    poller = select.poll()
    poller.register(connection, select.POLLIN)
    poller.register(step, select.POLLIN)
    received = b""
    while step not in dict(poller.poll()):
        data = connection.recv(64)
        if not data:
            signal.pidfd_send_signal(step, signal.SIGKILL)
            poller.unregister(connection)
            continue
        *lines, received = (received + data).split(b"\n")
        for line in lines:
            signal.pidfd_send_signal(step, int(line))


def stream(fd: int, mode: str, unbuffered: bool, errors: str) -> io.TextIOWrapper:
    """sys.stdin, sys.stdout or sys.stderr on descriptor `fd`, buffered as the interpreter would."""
    raw = io.FileIO(fd, mode, closefd=False)
    if mode == "r":
        return io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8")
    if unbuffered:  # PYTHONUNBUFFERED (run.py sets it for its steps)
        return io.TextIOWrapper(raw, encoding="utf-8", errors=errors, write_through=True)
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", errors=errors,
                            line_buffering=fd == 2 or os.isatty(fd))


def run_step(request: dict, fds: list[int]) -> None:
    """In the step's process: its descriptors, directory, environment and command, then its exit."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("cores"):
        os.sched_setaffinity(0, request["cores"])
    sys.executable = request.get("python", sys.executable)  # what starts its own `python run.py`s
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED")) or request.get("unbuffered", False)  # or `python -u`
    sys.stdin = sys.__stdin__ = stream(0, "r", unbuffered, "strict")
    sys.stdout = sys.__stdout__ = stream(1, "w", unbuffered, "strict")
    sys.stderr = sys.__stderr__ = stream(2, "w", unbuffered, "backslashreplace")
    if "torch" in sys.modules:
        import torch

        # TORCH_LOGS of this step: torch reads it at import, and no public function reads it again
        # (torch._logging.set_logs takes the settings, not the variable's text): torch's own reader
        torch._logging._internal._init_logs()
        if os.environ.get("OMP_NUM_THREADS", "").isdigit():
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    try:
        run(request["argv"])
        code = 0
    except SystemExit as end:
        code = end.code if isinstance(end.code, int) else 0 if end.code is None else 1
        if not isinstance(end.code, int | None):
            print(end.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - printed as the interpreter prints it, exit status 1
        sys.excepthook(*sys.exc_info())
        code = 1
    # the interpreter's exit but its modules' teardown (seconds with torch loaded; nothing a step needs):
    # its threads joined, its atexit handlers run (logging's flush among them), its streams flushed
    # No public functions do these two steps of the interpreter's exit without its module teardown
    # (what this leaves out): threading's own (its exit hooks, e.g. concurrent.futures' worker stop,
    # then a join of the non-daemon threads: joining them by hand would wait forever on an executor
    # never shut down) and atexit's runner.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for out in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            out.flush()
    os._exit(code)


def run(argv: list[str]) -> None:
    """`python -c CODE ARGS`, `python -m MODULE ARGS` or `python SCRIPT ARGS` (sys.argv and
    sys.path[0] as they set them)."""
    # Not a sys.path edit: this is a new process's start, which has run nothing yet, given the first
    # entry its interpreter's start would give it (`python SCRIPT`: the script's folder; -m: the
    # working directory; -c: ''). It inherited warm.py's own (experiments/gpu) with the fork, and
    # runpy does not set it for a script file (run_path inserts an entry only for a folder or a zip,
    # and run_module never does).
    if argv[0] == "-c":
        sys.argv, sys.path[0] = ["-c", *argv[2:]], ""
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        exec(compile(argv[1], "<string>", "exec"), main.__dict__)  # `python -c CODE`
    elif argv[0] == "-m":
        sys.argv, sys.path[0] = list(argv[1:]), os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)  # sys.argv[0]: the module's file
    else:
        sys.argv, sys.path[0] = list(argv), os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(os.path.abspath(argv[0]), run_name="__main__")  # __file__ absolute, as python sets it


if __name__ == "__main__":
    serve(sys.argv[1])
