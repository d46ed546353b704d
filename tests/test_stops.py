"""stops.py's rule, in processes of their own (signals are the process's): within stop_signals()
a stop raises, one swallowed on the way is raised again by raise_requested(), a second one while
the first unwinds ends the process at once, and a SIGINT the parent ignored is handled all the same."""

import signal
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT

HEAD = """import os, signal, time
from transformer_mt.stops import STOPS, exit_stopped, raise_requested, stop_signals
"""


def snippet(body: str, ignore_sigint: bool = False) -> subprocess.CompletedProcess:
    """`body` run by a new Python (after HEAD), SIGINT ignored from its start with `ignore_sigint`."""
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None
    return subprocess.run([sys.executable, "-c", HEAD + body], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          preexec_fn=ignore)


@pytest.mark.parametrize("name, status, by", [("SIGINT", 130, "Ctrl-C"), ("SIGTERM", 143, "SIGTERM")])
def test_a_stop_swallowed_on_the_way_still_ends_with_its_line_and_status(name, status, by):
    result = snippet(f"""
with stop_signals():
    try:
        try:
            os.kill(os.getpid(), signal.{name})
            time.sleep(5)
        except BaseException:
            pass  # a library's broad except, a finalizer
        raise_requested()
        print("went on")
    except STOPS as stop:
        exit_stopped(stop, "in the snippet")
""")
    assert (result.returncode, result.stdout, result.stderr) == (status, "", f"stopped by {by} in the snippet\n")


def test_a_second_stop_while_the_first_unwinds_ends_the_process_at_once():
    result = snippet("""
with stop_signals():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except STOPS:
        os.kill(os.getpid(), signal.SIGTERM)  # the cleanup takes long: a second stop
        time.sleep(5)
        print("cleaned up")
""")
    assert (result.returncode, result.stdout) == (143, "")
    assert result.stderr == "stopped by SIGTERM at once (a second stop while the first one was being handled)\n"


def test_a_sigint_ignored_from_the_start_stops_as_ctrl_c_does_and_is_ignored_again_after():
    """A background job of a script starts with SIGINT ignored: within stop_signals() kill -INT is a
    Ctrl-C; the handler before (ignoring) is put back after the block."""
    result = snippet("""
try:
    with stop_signals():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
except STOPS as stop:
    print(type(stop).__name__, signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
""", ignore_sigint=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "CtrlC True\n", "")


@pytest.mark.parametrize("where", ["as the file is created", "as a with statement takes it"])
def test_a_stop_landing_as_a_lock_is_taken_leaves_no_lock_file(tmp_path, where):
    """The stop lands after os.open created the lock file but before acquire kept its descriptor, or
    after acquire returned but before the `with` block that would release it began: the process
    ends with its stop's status and the file is gone."""
    lock_file = tmp_path / ".out.txt.lock"
    land = """
real_open = os.open
def open_then_stop(*args):
    real_open(*args)
    raise Terminated
os.open = open_then_stop
try:
    lock.acquire()
finally:
    os.open = real_open
""" if where == "as the file is created" else """
lock.acquire()
raise Terminated
"""
    result = snippet(f"""
from pathlib import Path
from transformer_mt.run_folder import FolderLock
from transformer_mt.stops import Terminated
lock = FolderLock(Path({str(tmp_path)!r}), Path({str(lock_file)!r}))
with stop_signals():
    try:
{textwrap.indent(land, "        ")}
    except STOPS as stop:
        print("exists", os.path.exists({str(lock_file)!r}))
        exit_stopped(stop, "as the lock was taken")
""")
    assert result.returncode == 143, result.stderr
    assert "exists True" in result.stdout  # the file was there as the stop was handled
    assert not lock_file.exists()
