"""atomic_file / atomic_dir: the final mode, flushing to disk, and two processes building one folder;
an output's lock taken whole or not at all."""

import fcntl
import os
import socket
import stat
from pathlib import Path

import pytest

from transformer_mt.atomic import atomic_dir, atomic_file
from transformer_mt.stops import Terminated
from transformer_mt.tasks.lines.writing import open_output


@pytest.fixture
def umask():
    """Set the umask for one test, restore it afterwards."""
    previous = os.umask(0o022)
    os.umask(previous)
    yield os.umask
    os.umask(previous)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_file_gets_the_mode_of_a_plain_open(tmp_path, umask, mask, mode):
    umask(mask)
    with atomic_file(tmp_path / "sub" / "out.txt") as tmp:
        tmp.write_text("done\n")
    with open(tmp_path / "plain.txt", "w") as f:
        f.write("done\n")
    assert stat.S_IMODE((tmp_path / "sub" / "out.txt").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode) == mode
    assert os.umask(mask) == mask  # the umask is left as it was
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["out.txt"]


def test_atomic_file_flushes_the_data_before_the_rename(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst) -> None:
        events.append(("replace", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    with atomic_file(tmp_path / "out.txt") as tmp:
        tmp.write_text("done\n")
    assert [kind for kind, _ in events] == ["fsync", "replace", "fsync"]
    assert Path(events[0][1]).name.startswith(".out.txt.")  # the temporary file, before the rename
    assert events[2][1] == str(tmp_path)  # then the folder's entry
    assert (tmp_path / "out.txt").read_text() == "done\n"


def test_atomic_file_error_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), atomic_file(tmp_path / "out.txt") as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash")
    assert list(tmp_path.iterdir()) == []


def test_atomic_dir_keeps_the_folder_another_process_made_first(tmp_path):
    target = tmp_path / "vocab-x"
    with atomic_dir(target) as tmp:
        (tmp / "src.json").write_text("ours")
        target.mkdir()  # the other process finished first
        (target / "src.json").write_text("winner")
    assert (target / "src.json").read_text() == "winner"
    assert [p.name for p in tmp_path.iterdir()] == ["vocab-x"]  # our temporary folder is gone


def test_atomic_dir_race_between_check_and_rename(tmp_path, monkeypatch):
    """The other process renames its folder into place just before ours (after any exists() check)."""
    target = tmp_path / "vocab-x"
    real_rename = Path.rename

    def rename_after_the_winner(self, dest):
        if Path(dest) == target and not target.exists():
            winner = tmp_path / ".vocab-x.winner"
            winner.mkdir()
            (winner / "src.json").write_text("winner")
            real_rename(winner, target)
        return real_rename(self, dest)

    monkeypatch.setattr(Path, "rename", rename_after_the_winner)
    with atomic_dir(target) as tmp:
        (tmp / "src.json").write_text("ours")
    assert (target / "src.json").read_text() == "winner"
    assert [p.name for p in tmp_path.iterdir()] == ["vocab-x"]


def test_atomic_dir_other_rename_errors_are_raised(tmp_path):
    target = tmp_path / "vocab-x"
    target.write_text("a file where the folder should go")
    with pytest.raises(NotADirectoryError), atomic_dir(target) as tmp:
        (tmp / "src.json").write_text("ours")
    assert [p.name for p in tmp_path.iterdir()] == ["vocab-x"] and target.is_file()


def test_atomic_dir_renames_into_place(tmp_path):
    with atomic_dir(tmp_path / "a" / "ids") as tmp:
        (tmp / "data").write_text("x")
    assert (tmp_path / "a" / "ids" / "data").read_text() == "x"
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["ids"]


def test_a_live_writers_temporary_output_is_never_removed_and_a_dead_ones_is(tmp_path, caplog):
    """open_output (task.output) removes a temporary output only holding the output's lock: a second
    writer is refused and the first one's file stays; once the lock is free, the left file goes."""
    from transformer_mt.errors import ConfigError
    from transformer_mt.tasks.lines.writing import open_output

    output = tmp_path / "out.txt"
    other = tmp_path / ".out.txt.abc.def.tmp"  # not a temporary file of out.txt: atomic_file's hold no dot
    other.write_text("kept\n")
    with open_output(str(output)) as first:
        first.write("one\n")
        live = list(tmp_path.glob(".out.txt.*.tmp"))
        with pytest.raises(ConfigError, match="another process is writing it"), open_output(str(output)):
            pass
        assert set(tmp_path.glob(".out.txt.*.tmp")) == set(live) and len(live) == 2
    assert output.read_text() == "one\n"
    dead = tmp_path / ".out.txt.k1ll3d_x.tmp"
    dead.write_text("half\n")
    with caplog.at_level("WARNING"), open_output(str(output)) as second:
        second.write("two\n")
    assert output.read_text() == "two\n" and not dead.exists() and other.read_text() == "kept\n"
    assert [r.getMessage() for r in caplog.records] == [
        f"removed {dead}: the temporary output of task.output={output} that a killed run left (it never became the "
        "output)"]



@pytest.mark.parametrize(("module", "name"), [(fcntl, "flock"), (socket, "gethostname")])
def test_a_stop_while_a_lock_is_taken_leaves_no_lock_file(tmp_path, monkeypatch, module, name):
    """A stop signal raises where it lands (stops.py): as task.output's lock is taken (as its flock
    returns, or as the line naming the holder is made), the lock file goes with it, and the next
    writer takes the lock."""
    real, calls = getattr(module, name), []

    def stopped_once(*args):
        calls.append(args)
        out = real(*args)
        if len(calls) == 1:
            raise Terminated  # the call happened; the signal lands as it returns
        return out

    monkeypatch.setattr(module, name, stopped_once)
    with pytest.raises(Terminated), open_output(str(tmp_path / "out.txt")):
        pass
    monkeypatch.undo()
    assert calls and sorted(p.name for p in tmp_path.iterdir()) == []  # no .out.txt.lock, no output
    with open_output(str(tmp_path / "out.txt")) as out:
        out.write("whole\n")
    assert (tmp_path / "out.txt").read_text() == "whole\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]
