"""Run folders: named so that they never collide, checked before Hydra writes into them, and a
training run's taken for itself.

Default folder names (conf/hydra/default.yaml) end with the launching process's id (`${pid:}`,
registered by `register_resolvers`): two runs started in the same second get two folders.

`ClaimRunFolder` (a Hydra callback, conf/hydra/default.yaml) runs when `python run.py` starts a
single run or a sweep. A run folder (or sweep folder) that cannot be created or written is one
line naming it and the cause, exit status 1, before any work. For `task=train` it then takes an
exclusive lock (fcntl.flock) on `<run dir>/run.lock`, which it holds until the process ends and
which names the run holding it, and it refuses, in one line and with exit status 1:
- a folder another training run holds (`hydra.run.dir=` given twice): their checkpoints, logs and
  metrics would mix;
- a folder that holds the checkpoints of an earlier training run, unless the run resumes from a
  checkpoint inside it (`ckpt_path=<folder>/checkpoints/last.ckpt`): a new run would overwrite
  them and mix its curves with theirs.
Only the process that launched the run claims the folder: the DDP ranks Lightning starts (they run
run.py again, with LOCAL_RANK set), the processes of other nodes (NODE_RANK) and other SLURM or
torchrun tasks share it. A run killed with SIGKILL leaves run.lock behind, but no lock: the
kernel releases it with the process, so resuming into the folder works.
"""

import atexit
import fcntl
import os
import socket
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from transformer_mt.choices import OWN_LAST

LOCK_FILE = "run.lock"
# tasks whose run folder is claimed like a training run's, and gone on in when run again
PIPELINES = ("distill", "backtranslate")
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def register_resolvers() -> None:
    """`${pid:}`: the id of the process that resolves it first (cached with the config, so a sweep's
    jobs and a SLURM job's copy of it read the launching process's)."""
    if not OmegaConf.has_resolver("pid"):
        OmegaConf.register_new_resolver("pid", lambda: str(os.getpid()), use_cache=True)


def launching_process(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process is the run's first (global rank 0): every rank variable set is 0."""
    return all(environ.get(name, "0") == "0" for name in RANK_VARIABLES)


class FolderLock:
    """An exclusive lock on `folder/run.lock` (or on the file `lock_file`), whose text names the
    process that holds it."""

    def __init__(self, folder: Path, lock_file: Path | None = None) -> None:
        self.path = lock_file or folder / LOCK_FILE
        self.fd: int | None = None
        self.owner: int | None = None  # the process that took it (a forked child inherits at_exit, not the lock)

    def acquire(self) -> bool:
        """Take the lock (False: another process holds it). The file is removed when released, so
        a lock is only good on the file that is at the path now. A stop signal (stops.py raises it
        where it lands) while the lock is being taken leaves no file that nobody holds (where it
        lands before the descriptor is kept, at_exit removes the file as the process ends)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.owner = os.getpid()
        atexit.register(self.at_exit)
        fd = None
        try:
            while True:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    atexit.unregister(self.at_exit)
                    return False
                if self.current(fd):
                    break
                os.close(fd)  # the holder removed the file as we opened it: take the new one
                fd = None
            self.fd = fd  # held: release() removes the file
            started = time.strftime("%Y-%m-%d %H:%M:%S")
            command = " ".join(["run.py", *sys.argv[1:]])
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}, started {started}: {command}\n".encode())
        except BaseException:
            if self.fd is not None:
                self.release()
            elif fd is not None:
                self.drop(fd)
            raise
        return True

    def current(self, fd: int) -> bool:
        """Whether `fd` is the file at the lock's path now."""
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def drop(self, fd: int) -> None:
        """Close `fd`, opened by an acquire that a stop interrupted; its file is removed where no other
        process holds it (a lock file is only good while held)."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if self.current(fd):
                self.path.unlink(missing_ok=True)
        except BlockingIOError:
            pass
        finally:
            os.close(fd)

    def holder(self) -> str:
        """What the lock file says of the process that holds it."""
        try:
            return self.path.read_text(encoding="utf-8", errors="replace").strip() or "starting"
        except OSError:
            return "unknown"

    def release(self) -> None:
        if self.fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self.fd)
            self.fd = None
        atexit.unregister(self.at_exit)

    def at_exit(self) -> None:
        """Run as the process ends if the lock was not released: a lock still held is released
        (a stop that landed as a `with` took it, before its block began), and a file that a stop
        left as it was created, before it was locked, is removed where no other process holds it."""
        if os.getpid() != self.owner:
            return
        if self.fd is not None:
            self.release()
            return
        try:
            fd = os.open(self.path, os.O_RDWR)
        except OSError:
            return
        self.drop(fd)


def earlier_run(folder: Path, ckpt_path: str | None) -> str | None:
    """Why a new training run may not use `folder`: it holds checkpoints of an earlier run and the
    run does not resume from one of them (None: it may)."""
    checkpoints = folder / "checkpoints"
    if not checkpoints.is_dir() or not any(checkpoints.rglob("*.ckpt")):
        return None
    if ckpt_path == OWN_LAST or (ckpt_path and Path(ckpt_path).resolve().is_relative_to(folder.resolve())):
        return None  # a resume into its own folder (ckpt_path=last: or its finished run, left as it is)
    last = checkpoints / "last.ckpt"
    how = f"resume it with ckpt_path={last} (or ckpt_path=last)" if last.is_file() else "keep it"
    return (f"{folder} holds the checkpoints of an earlier training run: {how}, or give this run another folder "
            "(hydra.run.dir=...)")


def claim(folder: Path, ckpt_path: str | None, pipeline: bool = False) -> FolderLock:
    """The lock of `folder` for a training run or a pipeline (which goes on in its folder when run
    again), or SystemExit(1) after one line saying why not."""
    lock = FolderLock(folder)
    if not lock.acquire():
        exit_refused(f"{folder} is the run folder of another {'pipeline' if pipeline else 'training run'}, still "
                     f"running ({lock.holder()}): wait for it to end, or give this run another folder "
                     "(hydra.run.dir=...)")
    problem = None if pipeline else earlier_run(folder, ckpt_path)
    if problem:
        lock.release()
        exit_refused(problem)
    return lock


def check_writable(folder: Path, key: str = "hydra.run.dir") -> None:
    """SystemExit(1) after one line naming `folder` and the cause, unless it can be created and a
    file written in it (`key`: the setting that names it)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        exit_refused(f"cannot write the run folder {folder}: {err.strerror or err} (give the run another one: "
                     f"{key}=...)")


def exit_refused(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


class ClaimRunFolder(Callback):
    """Hydra callback: a run's or a sweep's folder is checked before Hydra writes into it; a single
    training run claims its run folder and holds it until the process ends."""

    def __init__(self) -> None:
        self.lock: FolderLock | None = None

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        if not launching_process():
            return
        check_writable(Path(config.hydra.run.dir))
        name = config.task.get("name")
        if name not in ("train", *PIPELINES):
            return
        self.lock = claim(Path(config.hydra.run.dir), config.get("ckpt_path"), pipeline=name in PIPELINES)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        if launching_process():
            check_writable(Path(config.hydra.sweep.dir), "hydra.sweep.dir")

    def on_run_end(self, config: DictConfig, **kwargs) -> None:
        if self.lock is not None:
            self.lock.release()
