"""task.long_lines: what task=translate does with an input line longer than the model takes.

A source (its tokens and EOS) fits when it has fewer than the model's max_positions tokens (an
ensemble's: its members' shortest). `error` (default) stops the run with one line naming the line;
`skip` gives the line an empty output (with scores or n-best: what an empty input line gets);
`truncate` translates the first tokens that fit, then the source's EOS. Skipped or truncated lines
are each named in a warning, and counted in one line at the end (the count spans every chunk of the
input: one LongLines object for the whole run).
"""

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from transformer_mt.choices import LONG_LINES
from transformer_mt.errors import DataError
from transformer_mt.validate import check, listing, one_of

log = logging.getLogger(__name__)

DONE = {"skip": "skipped", "truncate": "truncated"}


@dataclass
class LongLines:
    """The rule for sources longer than the model takes, and how many lines it skipped or truncated."""

    mode: str = "error"
    count: int = 0
    limit: int | None = None  # the model's max_positions, once a long line was seen

    @classmethod
    def from_options(cls, options: Mapping) -> "LongLines":
        """The rule task.long_lines names; any other value is a ConfigError naming the key."""
        mode = options.get("long_lines") or "error"
        check("task.long_lines", mode, one_of(*LONG_LINES), listing(LONG_LINES))
        return cls(str(mode))

    def fit(self, sources: list[list[int]], limit: int, eos: int, places: list[str]) -> list[list[int] | None]:
        """Each source (its ids, EOS last) as the model will see it: as it is when shorter than
        `limit` (max_positions); else a DataError naming its place (`NAME:LINE`, places[i]) with
        `error`, None with `skip`, its first tokens and its EOS with `truncate` (limit - 1 in all)."""
        fitted: list[list[int] | None] = []
        for ids, place in zip(sources, places):
            if len(ids) < limit:
                fitted.append(ids)
                continue
            message = f"{place}: {len(ids)} tokens, more than the model's max_positions={limit} allows"
            if self.mode == "error":
                raise DataError(f"{message} (task.long_lines=skip or truncate translates the others)")
            self.count, self.limit = self.count + 1, limit
            tail = ids[-1:] if ids[-1] == eos else []
            kept = None if self.mode == "skip" else ids[: limit - 1 - len(tail)] + tail
            shown = "" if kept is None else f" to {len(kept)} tokens"
            log.warning("%s: %s%s (task.long_lines=%s)", message, DONE[self.mode], shown, self.mode)
            fitted.append(kept)
        return fitted

    def report(self, total: int) -> None:
        """One line counting the lines skipped or truncated of `total` (none: nothing)."""
        if self.count:
            log.warning("%s %d of %d lines longer than the model's max_positions=%d (task.long_lines=%s)",
                        DONE[self.mode], self.count, total, self.limit, self.mode)
