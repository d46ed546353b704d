"""Output files of task=translate and task=score: checked before any work, written whole
(they appear only once complete), or stdout. A temporary output a killed run left beside the file
is removed by the next run that writes it."""

import glob
import logging
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

from transformer_mt.atomic import atomic_file
from transformer_mt.errors import ConfigError
from transformer_mt.run_folder import FolderLock
from transformer_mt.validate import Refusal

log = logging.getLogger(__name__)


def output_refusal(path: str | None) -> Refusal:
    """Why `path` (task.output=) cannot become a file, or None: asked before translating."""
    if path is None:
        return None
    target = Path(path)
    if target.is_dir():
        return f"task.output={path}: is a directory"
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"task.output={path}: cannot create it, {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"task.output={path}: cannot write in {parent} (permission denied)"
    return None


@contextmanager
def open_output(path: str | None):
    """stdout, or a file that appears only once it is complete, held while it is written: a second
    process writing the same task.output is refused in one line (ConfigError) while the first runs."""
    if path is None:
        yield sys.stdout
        return
    target = Path(path)
    lock = FolderLock(target.parent, target.parent / f".{target.name}.lock")
    try:  # a stop as the lock is taken releases it too
        if not lock.acquire():
            raise ConfigError(f"task.output={path}: another process is writing it ({lock.holder()}); wait for it to "
                              "end, or write to another file")
        remove_leftovers(target)
        with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            yield f
    finally:
        lock.release()


def leftovers(target: Path) -> list[Path]:
    """The temporary outputs of `target` beside it (atomic_file's `.NAME.XXXXXXXX.tmp`)."""
    name = re.compile(re.escape(f".{target.name}.") + r"[a-z0-9_]+\.tmp")
    found = target.parent.glob(f"{glob.escape(f'.{target.name}.')}*.tmp")
    return sorted(path for path in found if name.fullmatch(path.name) and path.is_file())


def remove_leftovers(target: Path) -> None:
    """Remove (and say so) the temporary outputs of `target` a killed run left: called holding the
    output's lock, so that no live writer's file is touched."""
    for path in leftovers(target):
        path.unlink(missing_ok=True)
        log.warning("removed %s: the temporary output of task.output=%s that a killed run left (it never became "
                    "the output)", path, target)
