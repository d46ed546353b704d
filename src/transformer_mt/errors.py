"""Errors caused by the user's input: run.py prints their one-line message and exits with 1."""

import difflib
import errno
import importlib
import inspect
import os
import re
from collections.abc import Iterator

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)  # a full disk, an exhausted quota
# Hydra's InstantiationException for a node's argument its class does not take
CALL = re.compile(r"Error in call to target '([\w.]+)':\n.*unexpected keyword argument '(\w+)'.*\nfull_key: ([\w.]+)",
                  re.S)


class UserError(Exception):
    """A mistake in data, files or configuration; the message names the file, line or key."""


class DataError(UserError):
    """Bad data: a missing file, misaligned files, invalid UTF-8, an empty training set, a file that
    is not what its key says (a checkpoint, a lexical table, a run or model folder)."""


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
    node's argument its class does not take (`unexpected_argument`)."""
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


def parameters(target: str) -> list[str]:
    """The keyword arguments the class or function `target` (module.attribute) takes."""
    module, _, name = target.rpartition(".")
    try:
        fn = getattr(importlib.import_module(module), name)
        return [p for p in inspect.signature(fn).parameters if p not in ("self", "args", "kwargs")]
    except (ImportError, AttributeError, TypeError, ValueError):
        return []


def unexpected_argument(err: BaseException) -> ConfigError | None:
    """The ConfigError behind Hydra's `Error in call to target ...` when a node gave its class an
    argument the class does not take (`data.corpora.copy.wieght`): the key, the nearest argument,
    the ones it takes."""
    for cause in chain(err):
        found = CALL.search(str(cause))
        if found:
            target, argument, node = found.groups()
            names = parameters(target)
            close = difflib.get_close_matches(argument, names, n=1, cutoff=0.5)
            hint = f" (did you mean {node}.{close[0]}?)" if close else ""
            return ConfigError(f"{node}.{argument}: {target.rsplit('.', 1)[-1]} takes no argument {argument}{hint}; "
                               f"it takes {', '.join(names)}")
    return None
