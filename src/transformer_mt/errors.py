"""Errors caused by the user's input: run.py prints their one-line message and exits with 1."""

import errno
import os
from collections.abc import Iterator

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)  # a full disk, an exhausted quota


class UserError(Exception):
    """A mistake in data, files or configuration; the message names the file, line or key."""


class DataError(UserError):
    """Bad data: a missing file, misaligned files, invalid UTF-8, an empty training set."""


class ConfigError(UserError, ValueError):
    """A config value that cannot work; the message names the key."""


class TrainingDiverged(UserError):
    """The loss or the weights became NaN or inf; the message names the step and learning rate."""


class DiskFull(UserError):
    """A write failed for lack of space (ENOSPC) or quota (EDQUOT); the message names the file."""


def chain(err: BaseException | None) -> Iterator[BaseException]:
    """`err` and the errors behind it (its cause, or the error it was raised while handling)."""
    seen = set()
    while err is not None and id(err) not in seen:
        yield err
        seen.add(id(err))
        err = err.__cause__ or err.__context__


def disk_full(err: BaseException, path: object = None) -> DiskFull | None:
    """A DiskFull naming `path` (default: the file the OSError names) if `err` or an error behind it
    is an OSError ENOSPC or EDQUOT (torch.save, for one, raises its own error while handling it); a
    DiskFull already raised is kept as it is."""
    for cause in chain(err):
        if isinstance(cause, DiskFull):
            return cause
        if isinstance(cause, OSError) and cause.errno in NO_SPACE:
            path, reason = path or cause.filename, os.strerror(cause.errno)
            return DiskFull(f"{path}: {reason}" if path else f"{reason} (writing the run's files, the cache or output)")
    return None


def find_user_error(err: BaseException) -> UserError | None:
    """The UserError behind `err`, looking through wrappers such as Hydra's InstantiationException;
    a full disk met anywhere (an OSError ENOSPC or EDQUOT) is one too, and so are a trainer setting
    that Lightning refuses (its MisconfigurationException names the Trainer argument) and a config
    node's argument its class does not take (config_keys.unexpected_argument)."""
    from transformer_mt.config_keys import unexpected_argument  # it reads the config's classes

    return (next((cause for cause in chain(err) if isinstance(cause, UserError)), None) or disk_full(err)
            or lightning_refused(err) or unexpected_argument(err))


def lightning_refused(err: BaseException) -> ConfigError | None:
    """A ConfigError saying `trainer: <Lightning's message>` if Lightning refused a Trainer setting
    behind `err` (told by name: this module imports no Lightning)."""
    for cause in chain(err):
        kind = type(cause)
        if kind.__name__ == "MisconfigurationException" and kind.__module__.startswith("lightning"):
            return ConfigError(f"trainer: {' '.join(str(cause).split())}")
    return None


class HubError(UserError):
    """The Hugging Face hub cannot be reached, or refused an upload."""
