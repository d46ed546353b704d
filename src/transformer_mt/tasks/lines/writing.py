"""Output files of task=translate and task=score: checked before any work, written whole
(they appear only once complete), or stdout."""

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from transformer_mt.atomic import atomic_file
from transformer_mt.errors import ConfigError
from transformer_mt.run_folder import FolderLock


def check_output(path: str | None) -> None:
    """A ConfigError naming task.output= when `path` cannot become a file: checked before translating."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"task.output={path}: is a directory")
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"task.output={path}: cannot create it, {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"task.output={path}: cannot write in {parent} (permission denied)")


@contextmanager
def open_output(path: str | None):
    """stdout, or a file that appears only once it is complete, held while it is written: a second
    process writing the same task.output is refused in one line (ConfigError) while the first runs."""
    if path is None:
        yield sys.stdout
        return
    target = Path(path)
    lock = FolderLock(target.parent, target.parent / f".{target.name}.lock")
    if not lock.acquire():
        raise ConfigError(f"task.output={path}: another process is writing it ({lock.holder()}); wait for it to end, "
                          "or write to another file")
    try:
        with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            yield f
    finally:
        lock.release()
