"""Value checks for constructors: one line naming the config key, e.g. `model.heads=0: must be an
integer >= 1`, instead of a ZeroDivisionError later. Every check of a config value against a type,
a range or a set of choices goes through `check`, so that each failure reads `KEY=VALUE: must be
WHAT` (tests/test_validate.py keeps hand-written `must be` messages out); the predicates below
(`integer`, `number`, `one_of`, and the (predicate, what) pairs PROBABILITY and BOOLEAN) are what
it tests with. This module sits below every other: it imports transformer_mt.errors only."""

from collections.abc import Callable, Iterable, Sequence

from transformer_mt.errors import ConfigError


def integer(low: int, high: int | None = None) -> Callable[[object], bool]:
    """An int (not a bool) from low to high (no upper bound if None)."""
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low and (high is None or v <= high)


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


def one_of(*choices) -> Callable[[object], bool]:
    """Equal to one of `choices` and of its type (1 is not True, "true" is not True)."""
    return lambda v: any(type(v) is type(c) and v == c for c in choices)


BOOLEAN = (one_of(False, True), "true or false")
AT_LEAST_0 = (integer(0), "an integer >= 0")
AT_LEAST_1 = (integer(1), "an integer >= 1")  # a count (with null allowed, the schema says "or null")


def listing(choices: Iterable) -> str:
    """The choices as words for `what`: `a, b or c`."""
    words = [str(c).lower() if isinstance(c, bool) else str(c) for c in choices]
    return " or ".join(filter(None, (", ".join(words[:-1]), words[-1])))


Refusal = str | None  # a rule's answer: the one line refusing the config (naming its keys), or None where it holds


def refuse(reason: Refusal) -> None:
    """A ConfigError with `reason`, a rule's refusal, where there is one: the rules are functions
    that answer (a group's `refusal`, a task's `run_refusal`, the rules between groups, a machine's,
    an engine's), and this is where their answer stops the run."""
    if reason is not None:
        raise ConfigError(reason)


def first_refusal(rules: Iterable[Callable[..., Refusal]], *args) -> Refusal:
    """The answer of the first of `rules` (asked in order with `args`) that refuses, or None."""
    for rule in rules:
        if (reason := rule(*args)) is not None:
            return reason
    return None


def value_refusal(key: str, value, ok: Callable[[object], bool], what: str, nullable: bool = False) -> Refusal:
    """`KEY=VALUE: must be WHAT` unless `ok(value)` (or the value is None and may be)."""
    return None if (value is None and nullable) or ok(value) else f"{key}={value!r}: must be {what}"


def check(key: str, value, ok: Callable[[object], bool], what: str, nullable: bool = False) -> None:
    """ConfigError `KEY=VALUE: must be WHAT` unless `ok(value)` (or the value is None and may be)."""
    refuse(value_refusal(key, value, ok, what, nullable))


def text(v: object) -> bool:
    """A non-empty string."""
    return isinstance(v, str) and v != ""


PATH = (text, "a path")
PATHS = (lambda v: text(v) or (isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 0
                               and all(map(text, v))),
         "a path or a list of paths ([a.ckpt,b.ckpt])")


def increasing(low: int) -> Callable[[object], bool]:
    """A non-empty list of integers >= low, each larger than the one before ([1, 2, 3])."""
    return lambda v: (isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 0
                      and all(map(integer(low), v)) and all(a < b for a, b in zip(v, v[1:])))
