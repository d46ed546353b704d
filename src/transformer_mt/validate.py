"""Value checks for constructors: one line naming the config key, e.g. `model.heads=0: must be an
integer >= 1`, instead of a ZeroDivisionError later."""

from collections.abc import Callable

from transformer_mt.errors import ConfigError


def integer(low: int) -> Callable[[object], bool]:
    """An int (not a bool) >= low."""
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def number(low: float, high: float | None = None, low_open: bool = False,
           high_open: bool = False) -> Callable[[object], bool]:
    """An int or float (not a bool, not NaN) in the interval from low to high."""
    def ok(v) -> bool:
        if not isinstance(v, int | float) or isinstance(v, bool) or v != v:
            return False
        above = v > low if low_open else v >= low
        below = high is None or (v < high if high_open else v <= high)
        return above and below
    return ok


PROBABILITY = (number(0.0, 1.0, high_open=True), "a number in [0, 1)")


def check(key: str, value, ok: Callable[[object], bool], what: str, nullable: bool = False) -> None:
    """ConfigError `KEY=VALUE: must be WHAT` unless `ok(value)` (or the value is None and may be)."""
    if value is None and nullable:
        return
    if not ok(value):
        raise ConfigError(f"{key}={value!r}: must be {what}")
