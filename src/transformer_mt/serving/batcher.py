"""Lines of concurrent requests decoded together: the server submits each line as a job of its own
(translation_cache.decoded), a job waits at most `max_wait_ms` for others with the same decoding
(model, search, prefixes or not, alignments; not the tag, a row's first token), and the pool of
those waiting is cut by length: a batch is the oldest job and, where the pool holds more than the
budget of `max_tokens` source tokens, the jobs nearest it in length that fit, decoded as one call
of `translate_lines` (which sorts them by length again). So the sentences of every request and
direction pool together, a long request's lines spread over several batches, and a job larger
than the budget is decoded alone. Decoding runs
in worker threads (those that loaded the models: `decode_threads`), as many batches at once as
there are threads (inter_threads), so the event loop keeps taking requests meanwhile; what arrives
while every thread decodes forms the next batch. A request with alignments is decoded while no
other batch is (its model records its attention maps meanwhile). The lines waiting for a model are
bounded (`max_queue`): a request that would pass the bound is refused at once (QueueFull, the
server's 503 with Retry-After) and the queue, and the server's memory, stop growing. With a
`Joined` decoding (task.continuous_batching), a group it takes is a running batch: while every
thread decodes, the waiting jobs of its key are handed to it (its Inbox) and join it between two
of its steps, each answered as it ends."""

import asyncio
import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial


@dataclass
class Pending:
    """Lines waiting to be decoded with others of the same `key` (the server's: one line each)."""

    key: tuple
    lines: list[str]
    tokens: int  # source tokens, the budget's unit
    payload: object = None  # what the decode function needs beside the lines (prefixes, the search)
    exclusive: bool = False  # decoded while no other group is (alignments: the model records its attention)
    model: str = ""  # the model's name: the queue it waits in
    arrived: float = field(default_factory=time.monotonic)
    future: asyncio.Future | None = None


Decode = Callable[[list[Pending]], list[object]]  # jobs of one key -> each job's result
Observe = Callable[[list[Pending], float], None]  # a decoded group's jobs and its seconds (the metrics)


class QueueFull(Exception):
    """A request refused because the lines waiting for its model reached the bound: `retry_after`
    seconds is how long those waiting take to decode at the rate so far (at least 1)."""

    def __init__(self, model: str, waiting: int, bound: int, retry_after: int) -> None:
        super().__init__(f"model={model}: {waiting} lines are waiting to be decoded, the {bound} the server queues "
                         f"(task.max_queue); retry after {retry_after} s")
        self.model, self.retry_after = model, retry_after


def per_line(job: Pending) -> float:
    """A job's source tokens per line: its length, as the pool sorts it."""
    return job.tokens / max(len(job.lines), 1)


def decode_threads(count: int = 1, threads: int | None = None) -> ThreadPoolExecutor:
    """The threads that run torch in a server: they load the models and decode the batches, `count`
    batches at once (the keys inter_threads and intra_threads: inference/workers.py), each running
    torch with `threads` threads (None: torch's default). No other thread runs torch: torch's
    OpenMP threads belong to the thread that first runs parallel work, and a second thread running
    torch with several threads gets a team of its own, which ran 3x slower on a 2-core Xeon (68 ms a
    sentence against 20 ms); decoders of one thread each have no team."""
    initializer = None if threads is None else partial(set_torch_threads, threads)
    return ThreadPoolExecutor(max_workers=count, thread_name_prefix="decode", initializer=initializer)


def set_torch_threads(threads: int) -> None:
    """torch's threads in this thread (imported here: the batcher itself never runs torch)."""
    import torch

    torch.set_num_threads(threads)


class Batcher:
    """Groups jobs by key under a token budget and decodes each group with `decode` in `worker`'s
    threads, `concurrency` groups at once (its thread count)."""

    def __init__(self, decode: Decode, max_tokens: int, max_wait_ms: int, worker: ThreadPoolExecutor | None = None,
                 concurrency: int = 1, max_queue: int | None = None, observe: Observe | None = None,
                 joined: "Joined | None" = None) -> None:
        """`max_queue`: the lines that may wait for one model (None: no bound); `observe`: told of
        each decoded group; `joined`: the decoding whose groups are running batches (None: none)."""
        self.decode, self.max_tokens, self.max_wait = decode, max_tokens, max_wait_ms / 1000
        self.max_queue, self.observe, self.joined = max_queue, observe, joined
        self.waiting: list[Pending] = []
        self.changed = asyncio.Event()  # a job arrived, a group ended, a job of a running batch was answered
        self.worker = worker or decode_threads(concurrency)
        self.concurrency = concurrency
        self.running: set[asyncio.Task] = set()  # the groups being decoded
        self.inboxes: set[Inbox] = set()  # those that are running batches, taking jobs as they decode
        self.exclusive = False  # the group being decoded is an exclusive one
        self.finished = asyncio.Event()  # a group was decoded
        self.task: asyncio.Task | None = None
        self.batches = 0  # groups decoded
        self.lines = 0  # lines decoded
        self.answered = 0  # jobs answered (with their translations or their error)
        self.busy = 0.0  # seconds the worker threads spent decoding, summed

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.loop())

    def report(self, seconds: float) -> str:
        """What the batcher did in `seconds` of serving, in words (for the log)."""
        mean = self.answered / max(self.batches, 1)
        busy = 100 * self.busy / max(seconds * self.concurrency, 1e-9)
        threads = f" ({self.concurrency} decoders)" if self.concurrency > 1 else ""
        return (f"{self.answered} lines in {self.batches} batches ({mean:.1f} a batch), decoding "
                f"{busy:.0f}% of {seconds:.0f} s{threads}")

    async def stop(self) -> None:
        """Decode what is waiting, then stop the loop and the worker threads."""
        while self.waiting or self.running:
            await asyncio.sleep(0.01)
        if self.task is not None:
            self.task.cancel()
        self.worker.shutdown(wait=True)

    def waiting_lines(self, model: str) -> int:
        """The lines waiting for `model` (not yet being decoded)."""
        return sum(len(job.lines) for job in self.waiting if job.model == model)

    def admit(self, model: str, lines: int) -> None:
        """QueueFull where `lines` more would take `model`'s waiting lines past max_queue (what comes
        to an empty queue is taken whatever its size)."""
        waiting = self.waiting_lines(model)
        if self.max_queue is None or not waiting or waiting + lines <= self.max_queue:
            return
        rate = self.lines / self.busy * self.concurrency if self.busy > 0 else 0.0  # lines a second
        retry = min(60, max(1, math.ceil(waiting / rate))) if rate > 0 else 1
        raise QueueFull(model, waiting, self.max_queue, retry)

    async def submit(self, job: Pending) -> object:
        """The job's result, once its batch is decoded (its error, raised here); QueueFull at once
        where its model's queue is full."""
        return (await self.submit_all([job]))[0]

    async def submit_all(self, jobs: list[Pending]) -> list[object]:
        """Each job's result (one model's jobs, a request's lines), taken all or none: QueueFull at
        once where together they would pass the bound; the first error, raised here."""
        self.admit(jobs[0].model, sum(len(job.lines) for job in jobs))
        loop = asyncio.get_running_loop()
        for job in jobs:
            job.future = loop.create_future()
        self.waiting.extend(jobs)
        self.changed.set()
        try:
            return list(await asyncio.gather(*(job.future for job in jobs)))
        finally:  # a client gone, or one line failed: the others are not decoded for nothing
            for job in jobs:
                job.future.cancel()

    def batch(self) -> list[Pending]:
        """The waiting jobs that go next: the oldest, and those of its key within the budget; where
        they pass it, those nearest the oldest in length first (then the oldest first)."""
        first = self.waiting[0]
        alike = [job for job in self.waiting[1:] if job.key == first.key]
        if first.tokens + sum(job.tokens for job in alike) > self.max_tokens:
            alike.sort(key=lambda job: abs(per_line(job) - per_line(first)))
        taken, tokens = [first], first.tokens
        for job in alike:
            if tokens + job.tokens <= self.max_tokens:
                taken.append(job)
                tokens += job.tokens
        return taken

    def full(self) -> bool:
        first = self.waiting[0]
        return sum(j.tokens for j in self.waiting if j.key == first.key) >= self.max_tokens

    def free(self) -> bool:
        """Whether a group may start now: a thread is free, and no exclusive group decodes."""
        return len(self.running) < self.concurrency and not self.exclusive

    async def loop(self) -> None:
        while True:
            self.changed.clear()
            left = None
            if self.waiting and self.free():  # a free thread: the oldest waits at most max_wait for others
                left = self.waiting[0].arrived + self.max_wait - time.monotonic()
                if left <= 0 or self.full():
                    await self.begin()
                    continue
            elif self.waiting:  # every thread busy: jobs join the running batches that take them, the others gather
                self.hand_over()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)

    async def begin(self) -> None:
        """The next group taken from the waiting jobs and started."""
        jobs = self.batch()
        self.waiting = [j for j in self.waiting if all(j is not t for t in jobs)]
        jobs = [j for j in jobs if not j.future.done()]  # a client gone: its lines are not decoded
        if jobs:
            if jobs[0].exclusive:  # the group's jobs share one key, and so exclusiveness
                await self.until(lambda: not self.running)
                self.exclusive = True
            self.running.add(asyncio.get_running_loop().create_task(self.run(jobs)))

    def hand_over(self) -> None:
        """Each waiting job a running batch of its key takes (the one with the fewest source tokens
        in flight, within the budget) joins it at its next step."""
        for job in list(self.waiting):
            open_ = [inbox for inbox in self.inboxes
                     if inbox.key == job.key and inbox.tokens + job.tokens <= self.max_tokens]
            if open_ and not job.future.done() and min(open_, key=lambda inbox: inbox.tokens).offer(job):
                self.waiting.remove(job)

    async def until(self, ready: Callable[[], bool]) -> None:
        """Returns once ready() holds, looking each time a group was decoded."""
        while not ready():
            self.finished.clear()
            await self.finished.wait()

    async def run(self, jobs: list[Pending]) -> None:
        """One group decoded in a worker thread; each job answered with its result, or the error. A
        group the `joined` decoding takes is a running batch: jobs join it as it decodes (its Inbox)
        and are answered as they end."""
        started, loop = time.monotonic(), asyncio.get_running_loop()
        inbox = None
        if self.joined is not None and self.joined.takes(jobs[0]):
            inbox = Inbox(jobs, partial(loop.call_soon_threadsafe, self.answer))
            self.inboxes.add(inbox)
        try:
            if inbox is None:
                results = await loop.run_in_executor(self.worker, self.decode, jobs)
                for job, result in zip(jobs, results):
                    self.answer(job, result)
            else:
                await loop.run_in_executor(self.worker, self.joined.decode, jobs, inbox)
        except Exception as err:  # the requests' error: each of them is answered with it
            for job in jobs if inbox is None else inbox.handled:
                if not job.future.done():
                    job.future.set_exception(err)
        finally:
            self.inboxes.discard(inbox)
            done = jobs if inbox is None else inbox.handled
            seconds = time.monotonic() - started
            self.batches, self.answered, self.busy = self.batches + 1, self.answered + len(done), self.busy + seconds
            self.lines += sum(len(job.lines) for job in done)
            if self.observe is not None:
                self.observe(done, seconds)
            self.running.discard(asyncio.current_task())
            self.exclusive = self.exclusive and bool(self.running)
            self.finished.set()
            self.changed.set()

    def answer(self, job: Pending, result: object) -> None:
        """A job's result (in the event loop): its request answered, its budget freed in a running batch."""
        if not job.future.done():
            job.future.set_result(result)
        for inbox in self.inboxes:
            inbox.left(job)
        self.changed.set()


class Inbox:
    """The jobs of a running batch (a group of the `joined` decoding): those it started with and
    those handed to it as it decodes (`offer`, in the event loop; `take`, in its decoding thread),
    each answered as it ends (`answered(job, result)`, thread-safe); `tokens`: the source tokens of
    the jobs not yet answered."""

    def __init__(self, jobs: list[Pending], answered: Callable[[Pending, object], object]) -> None:
        self.key, self.answered = jobs[0].key, answered
        self.handled, self.new = list(jobs), deque()
        self.tokens, self.pending = sum(job.tokens for job in jobs), {id(job) for job in jobs}
        self.lock, self.closed = threading.Lock(), False

    def offer(self, job: Pending) -> bool:
        """`job` joins the batch (False: it has ended, and takes no more)."""
        with self.lock:
            if self.closed:
                return False
            self.new.append(job)
        self.handled.append(job)
        self.tokens += job.tokens
        self.pending.add(id(job))
        return True

    def take(self) -> list[Pending]:
        """The jobs handed over since the last look (the decoding thread's)."""
        with self.lock:
            taken, self.new = list(self.new), deque()
        return taken

    def close(self) -> bool:
        """Ends the batch where no job was handed over since the last look (else False: take them)."""
        with self.lock:
            self.closed = not self.new
            return self.closed

    def left(self, job: Pending) -> None:
        """`job` was answered: its tokens leave the budget."""
        if id(job) in self.pending:
            self.pending.discard(id(job))
            self.tokens -= job.tokens


@dataclass(frozen=True)
class Joined:
    """A decoding whose groups are running batches: `takes(job)` says which jobs' groups (their
    key's), `decode(jobs, inbox)` decodes them and what the inbox hands over, answering each job
    through `inbox.answered` as it ends."""

    takes: Callable[[Pending], bool]
    decode: Callable[[list[Pending], Inbox], None]
