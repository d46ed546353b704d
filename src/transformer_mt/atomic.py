"""Write a file or build a folder so that it appears only when complete: a crash or an error
never leaves half of one behind."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """A temporary path next to `path` to write to; renamed to `path` when the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """A temporary folder next to `path` to fill; renamed to `path` when the block succeeds (if
    another process got there first, its folder is kept and this one dropped)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}."))
    try:
        yield tmp
        if not path.exists():
            tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
