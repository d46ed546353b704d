"""Errors caused by the user's input: run.py prints their one-line message and exits with 1."""


class UserError(Exception):
    """A mistake in data, files or configuration; the message names the file, line or key."""


class DataError(UserError):
    """Bad data: a missing file, misaligned files, invalid UTF-8, an empty training set."""


class ConfigError(UserError, ValueError):
    """A config value that cannot work; the message names the key."""


class TrainingDiverged(UserError):
    """The loss or the weights became NaN or inf; the message names the step and learning rate."""


def find_user_error(err: BaseException) -> UserError | None:
    """The UserError behind `err`, looking through wrappers such as Hydra's InstantiationException."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, UserError):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


class HubError(UserError):
    """The Hugging Face hub cannot be reached, or refused an upload."""
