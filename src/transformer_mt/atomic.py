"""Write a file or build a folder so that it appears only when complete: a crash or an error
never leaves half of one behind, and a full disk is a DiskFull naming what was being written."""

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from transformer_mt.errors import disk_full


def current_umask() -> int:
    """The process umask (os.umask can only be read by setting it: it is restored at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_file(path: Path) -> None:
    """Flush a written file's data to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Flush a folder's entries (a rename into it) to the disk, where folders can be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """A temporary path next to `path` to write to; renamed to `path` when the block succeeds, with
    the mode a plain open() would give (0o666 minus the umask) and its data flushed to the disk.
    Out of space (ENOSPC, EDQUOT), the temporary file is removed and DiskFull names `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~current_umask())
        fsync_file(Path(tmp))
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except Exception as err:
        full = disk_full(err, path)
        if full is None or full is err:
            raise
        raise full from err
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """A temporary folder next to `path` to fill; renamed to `path` when the block succeeds (if
    another process got there first, its folder is kept and this one dropped). Out of space, the
    temporary folder is removed and DiskFull names `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}."))
    try:
        yield tmp
        try:
            tmp.rename(path)
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not path.is_dir():
                raise
    except Exception as err:
        full = disk_full(err, path)
        if full is None or full is err:
            raise
        raise full from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
