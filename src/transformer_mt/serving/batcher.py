"""Concurrent requests decoded together: a request waits at most `max_wait_ms` for others with the
same decoding (model, search, tag, prefixes or not, alignments), and those waiting are decoded as one
call of `translate_lines` of up to `max_tokens` source tokens (a request's lines are never split; a
request larger than the budget is decoded alone). Decoding runs in one worker thread (the thread
that loaded the models: `decode_thread`), so the event loop keeps taking requests meanwhile; what
arrives during a decode forms the next batch."""

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field


@dataclass
class Pending:
    """One request's lines waiting to be decoded with others of the same `key`."""

    key: tuple
    lines: list[str]
    tokens: int  # source tokens, the budget's unit
    payload: object = None  # what the decode function needs beside the lines (prefixes, the search)
    arrived: float = field(default_factory=time.monotonic)
    future: asyncio.Future | None = None


Decode = Callable[[list[Pending]], list[object]]  # jobs of one key -> each job's result


def decode_thread() -> ThreadPoolExecutor:
    """The one thread that runs torch in a server: it loads the models and decodes every batch.
    torch's OpenMP threads belong to the thread that first runs parallel work: a second thread
    running torch gets a team of its own, which ran 3x slower on a 2-core Xeon (2 threads, the
    shipped model: 68 ms a sentence, against 20 ms where one thread did everything)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode")


class Batcher:
    """Groups jobs by key under a token budget and decodes each group with `decode` in one thread."""

    def __init__(self, decode: Decode, max_tokens: int, max_wait_ms: int, worker: ThreadPoolExecutor | None = None
                 ) -> None:
        self.decode, self.max_tokens, self.max_wait = decode, max_tokens, max_wait_ms / 1000
        self.waiting: list[Pending] = []
        self.arrived = asyncio.Event()
        self.worker = worker or decode_thread()
        self.task: asyncio.Task | None = None
        self.batches: list[int] = []  # the jobs of each decoded batch
        self.answered = 0  # requests answered (with their translations or their error)
        self.busy = 0.0  # seconds the worker spent decoding

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.loop())

    def report(self, seconds: float) -> str:
        """What the batcher did in `seconds` of serving, in words (for the log)."""
        mean = self.answered / max(len(self.batches), 1)
        return (f"{self.answered} requests in {len(self.batches)} batches ({mean:.1f} a batch), decoding "
                f"{100 * self.busy / max(seconds, 1e-9):.0f}% of {seconds:.0f} s")

    async def stop(self) -> None:
        """Decode what is waiting, then stop the loop and the worker thread."""
        while self.waiting:
            await asyncio.sleep(0.01)
        if self.task is not None:
            self.task.cancel()
        self.worker.shutdown(wait=True)

    async def submit(self, job: Pending) -> object:
        """The job's result, once its batch is decoded (its error, raised here)."""
        job.future = asyncio.get_running_loop().create_future()
        self.waiting.append(job)
        self.arrived.set()
        return await job.future

    def batch(self) -> list[Pending]:
        """The waiting jobs that go next: the oldest and those of its key after it, within the budget."""
        first = self.waiting[0]
        taken, tokens = [first], first.tokens
        for job in self.waiting[1:]:
            if job.key == first.key and tokens + job.tokens <= self.max_tokens:
                taken.append(job)
                tokens += job.tokens
        return taken

    def full(self) -> bool:
        first = self.waiting[0]
        return sum(j.tokens for j in self.waiting if j.key == first.key) >= self.max_tokens

    async def loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self.waiting:
                self.arrived.clear()
                await self.arrived.wait()
            while not self.full() and (left := self.waiting[0].arrived + self.max_wait - time.monotonic()) > 0:
                self.arrived.clear()
                try:
                    await asyncio.wait_for(self.arrived.wait(), left)
                except asyncio.TimeoutError:
                    break
            jobs = self.batch()
            self.waiting = [j for j in self.waiting if all(j is not t for t in jobs)]
            jobs = [j for j in jobs if not j.future.done()]  # a client gone: its lines are not decoded
            if not jobs:
                continue
            self.batches.append(len(jobs))
            started = time.monotonic()
            try:
                results = await loop.run_in_executor(self.worker, self.decode, jobs)
            except Exception as err:  # the requests' error: each of them is answered with it
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(err)
                self.answered += len(jobs)
                self.busy += time.monotonic() - started
                continue
            for job, result in zip(jobs, results):
                if not job.future.done():
                    job.future.set_result(result)
            self.answered += len(jobs)
            self.busy += time.monotonic() - started
