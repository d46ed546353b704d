"""How decoding uses the CPU's cores: `inter` decoders at once, each in a thread of its own that
runs torch with `intra` threads, each decoder on batches of its own (CTranslate2's inter_threads
and intra_threads; Marian's --cpu-threads are one-thread workers too). Results come back in the
order the batches were given.

Why not one decoder on every core: a decoding step is hundreds of small operations, and torch's
OpenMP threads wait for each other at the end of every one of them; they spin while they wait, so
when another process needs a core the team loses it and decoding slows 3-25x (issue 80). A
decoder with one thread has no team to wait for, and the decoders overlap each other's Python
work: torch releases the GIL inside every operation. The default is therefore one one-thread
decoder per core on the CPU (`inter_threads` and `intra_threads` null); on a GPU one decoder.
"""

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

Item = TypeVar("Item")
Result = TypeVar("Result")


CORES = torch.get_num_threads()  # read when the package is imported, before any task changes it


def cores() -> int:
    """The threads torch would use by default: the CPU's cores (or OMP_NUM_THREADS)."""
    return CORES


def thread_counts(inter: int | None, intra: int | None, device: torch.device, available: int | None = None
                  ) -> tuple[int, int]:
    """(decoders, threads each) for the keys `inter_threads` and `intra_threads` (null: the default,
    one one-thread decoder per core on the CPU, one decoder on a GPU; intra null: the cores shared
    out among the decoders). `available`: the cores to share (None: the machine's, `cores()`; a
    process of several on one machine: its share)."""
    available = available or cores()
    if device.type != "cpu":
        return 1, intra or available
    decoders = inter or (available if intra is None else max(1, available // intra))
    return decoders, intra or max(1, available // decoders)


class Workers:
    """`inter` decoders, each a thread running torch with `intra` threads (one decoder: the calling
    thread, with `intra` threads; None: as many as torch has). `map(fn, items)` runs fn on every
    item, at most `inter` at once, and yields the results in the items' order. Close it (or use it
    as a context manager) to stop the threads and give the calling thread back its torch threads."""

    def __init__(self, inter: int = 1, intra: int | None = None) -> None:
        self.inter, self.intra = inter, intra
        self.before: int | None = None  # the calling thread's torch threads, where `map` changed them
        self.pool = None if inter == 1 else ThreadPoolExecutor(inter, thread_name_prefix="decoder",
                                                              initializer=torch.set_num_threads,
                                                              initargs=(intra or 1,))

    @classmethod
    def for_device(cls, inter: int | None, intra: int | None, device: torch.device, available: int | None = None
                   ) -> "Workers":
        """The decoders of the keys `inter_threads` and `intra_threads` on `device` (thread_counts)."""
        return cls(*thread_counts(inter, intra, device, available))

    def describe(self) -> str:
        """The decoders in words, for the log."""
        decoders = "1 decoder" if self.inter == 1 else f"{self.inter} decoders"
        threads = self.intra or torch.get_num_threads()
        return f"{decoders} x {threads} thread{'s' if threads > 1 else ''}"

    def map(self, fn: Callable[[Item], Result], items: Iterable[Item]) -> Iterator[Result]:
        """fn(item) of every item, in order; on the decoders' threads when there are several."""
        if self.pool is None:
            if self.intra is not None and torch.get_num_threads() != self.intra:
                self.before = self.before or torch.get_num_threads()
                torch.set_num_threads(self.intra)
            return map(fn, items)
        return self.pool.map(fn, items)

    def close(self) -> None:
        """The threads stopped; the calling thread's torch threads as they were before `map`."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        if self.before is not None:
            torch.set_num_threads(self.before)
            self.before = None

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


SERIAL = Workers()  # the calling thread, with the threads torch has
