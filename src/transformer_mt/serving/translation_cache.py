"""The translation cache: the last `task.cache_lines` lines decoded, each by how it decoded (the
model, the search and its options, the tag, its prefix and constraints, alignments or not) and its
text. A request's lines found there are answered without decoding, the others go to the batcher (a
job each): exact, since a line decodes the same whatever its batch (tests/e2e/test_serve.py); a search that
samples is never cached. Used from the event loop only (no lock)."""

from collections import OrderedDict
from collections.abc import Hashable

from transformer_mt.serving.batcher import Batcher, Pending
from transformer_mt.serving.decode import Decoded, line_keys, part

Line = tuple  # a line's n-best list and its off-target flag


class TranslationCache:
    """A bounded map of lines decoded, the least recently used dropped first (size 0: none kept)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[Hashable, Line] = OrderedDict()

    def found(self, keys: list[Hashable | None]) -> list[Line | None]:
        """Each key's line, or None where it is not kept (a key None: never)."""
        out = []
        for key in keys:
            line = None if key is None else self.entries.get(key)
            if line is not None:
                self.entries.move_to_end(key)
            out.append(line)
        return out

    def keep(self, keys: list[Hashable | None], lines: list[Line]) -> None:
        """Keep each line under its key (a key None: not kept), dropping the oldest past `size`."""
        for key, line in zip(keys, lines):
            if key is None or not self.size:
                continue
            self.entries[key] = line
            self.entries.move_to_end(key)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)


async def decoded(job: Pending, batcher: Batcher, cache: TranslationCache) -> tuple[Decoded, int]:
    """The job's lines, those the cache holds taken from it and the others decoded by the batcher,
    each line a job of its own (the pool's unit: a request's lines may go in several batches, with
    other requests' lines), then kept; and how many came from the cache."""
    keys = line_keys(job)
    lines = cache.found(keys)
    missing = [i for i, line in enumerate(lines) if line is None]
    if missing:
        answers: list[Decoded] = await batcher.submit_all([part(job, [i]) for i in missing])
        new = [(answer.nbests[0], answer.off_target[0]) for answer in answers]
        cache.keep([keys[i] for i in missing], new)
        for i, line in zip(missing, new):
            lines[i] = line
    return Decoded([nbest for nbest, _ in lines], [off for _, off in lines]), len(lines) - len(missing)
