"""The batcher: requests of one decoding that arrive within max_wait_ms are decoded as one batch,
within the token budget; other decodings, and what does not fit, go in later batches, a pool larger
than the budget cut by length; every request gets its own lines' results, in order; a decode error
answers each request of its batch; the lines waiting for a model are bounded (task.max_queue), a
request's jobs admitted all or none."""

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from transformer_mt.serving.batcher import Batcher, Joined, Pending, QueueFull


def recording(batches: list[list[list[str]]]):
    def decode(jobs: list[Pending]) -> list[list[str]]:
        batches.append([job.lines for job in jobs])
        return [[line.upper() for line in job.lines] for job in jobs]
    return decode


async def serve(batcher: Batcher, jobs: list[Pending], gap: float = 0.0) -> list:
    batcher.start()
    tasks = []
    for job in jobs:
        tasks.append(asyncio.create_task(batcher.submit(job)))
        await asyncio.sleep(gap)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    await batcher.stop()
    return results


def test_requests_within_the_wait_are_one_batch_and_each_gets_its_own_lines():
    batches = []
    jobs = [Pending("greedy", [f"line {i}", f"more {i}"], tokens=10) for i in range(5)]
    results = asyncio.run(serve(Batcher(recording(batches), max_tokens=1000, max_wait_ms=200), jobs))
    assert results == [[f"LINE {i}", f"MORE {i}"] for i in range(5)]
    assert batches == [[job.lines for job in jobs]]


def test_other_decodings_and_what_does_not_fit_go_in_later_batches():
    batches = []
    jobs = [Pending("greedy", ["a"], tokens=30), Pending("beam", ["b"], tokens=30), Pending("greedy", ["c"], tokens=30),
            Pending("greedy", ["d"], tokens=30), Pending("greedy", ["e"], tokens=500)]
    results = asyncio.run(serve(Batcher(recording(batches), max_tokens=64, max_wait_ms=200), jobs))
    assert results == [["A"], ["B"], ["C"], ["D"], ["E"]]
    # the oldest's decoding first, as many as the 64-token budget takes; a job over the budget alone
    assert batches == [[["a"], ["c"]], [["b"]], [["d"]], [["e"]]]


def test_without_waiting_each_request_that_finds_the_worker_idle_goes_at_once():
    batches = []
    jobs = [Pending("greedy", [str(i)], tokens=1) for i in range(3)]
    asyncio.run(serve(Batcher(recording(batches), max_tokens=1000, max_wait_ms=0), jobs, gap=0.05))
    assert batches == [[["0"]], [["1"]], [["2"]]]


def test_a_decode_error_answers_every_request_of_its_batch():
    def failing(jobs: list[Pending]) -> list:
        raise RuntimeError("out of memory")

    batcher = Batcher(failing, max_tokens=1000, max_wait_ms=100)
    results = asyncio.run(serve(batcher, [Pending("k", ["a"], 1), Pending("k", ["b"], 1)]))
    assert [str(r) for r in results] == ["out of memory", "out of memory"] and batcher.answered == 2


@pytest.mark.parametrize("wait_ms", [0, 50])
def test_a_request_whose_client_left_is_not_decoded(wait_ms):
    batches = []

    async def scenario() -> list:
        batcher = Batcher(recording(batches), max_tokens=1000, max_wait_ms=wait_ms)
        batcher.start()
        gone = asyncio.create_task(batcher.submit(Pending("k", ["gone"], 1)))
        await asyncio.sleep(0)
        gone.cancel()
        kept = await batcher.submit(Pending("k", ["kept"], 1))
        await batcher.stop()
        return kept

    assert asyncio.run(scenario()) == ["KEPT"]
    assert batches == [[["kept"]]]


def overlapping(log: list[tuple[str, str]], hold: float = 0.1):
    """A decode that records when each group starts and ends (by its first line), taking `hold` seconds."""
    def decode(jobs: list[Pending]) -> list[list[str]]:
        log.append(("start", jobs[0].lines[0]))
        time.sleep(hold)
        log.append(("end", jobs[0].lines[0]))
        return [job.lines for job in jobs]
    return decode


def most_at_once(log: list[tuple[str, str]]) -> int:
    running = most = 0
    for event, _ in log:
        running += 1 if event == "start" else -1
        most = max(most, running)
    return most


@pytest.mark.parametrize("concurrency", [1, 2, 3])
def test_as_many_groups_decode_at_once_as_the_batcher_has_threads(concurrency):
    log: list[tuple[str, str]] = []
    jobs = [Pending(f"key {i}", [str(i)], tokens=1) for i in range(6)]  # six decodings: six groups
    batcher = Batcher(overlapping(log), max_tokens=1000, max_wait_ms=0,
                      worker=ThreadPoolExecutor(concurrency), concurrency=concurrency)
    results = asyncio.run(serve(batcher, jobs))
    assert results == [[str(i)] for i in range(6)] and batcher.answered == 6
    assert most_at_once(log) == concurrency


def test_an_exclusive_group_decodes_while_no_other_does():
    log: list[tuple[str, str]] = []
    jobs = [Pending("a", ["a"], 1), Pending("b", ["b"], 1), Pending("x", ["x"], 1, exclusive=True),
            Pending("c", ["c"], 1), Pending("d", ["d"], 1)]
    batcher = Batcher(overlapping(log, 0.05), max_tokens=1000, max_wait_ms=0, worker=ThreadPoolExecutor(2),
                      concurrency=2)
    assert asyncio.run(serve(batcher, jobs)) == [["a"], ["b"], ["x"], ["c"], ["d"]]
    start, end = log.index(("start", "x")), log.index(("end", "x"))
    assert end == start + 1, log  # nothing started or ended while x decoded
    assert most_at_once(log) == 2


def test_a_full_queue_refuses_at_once_and_every_request_taken_is_answered():
    """While the decoder is busy, lines wait; a request that would take its model's waiting lines past
    max_queue is refused at once (QueueFull: the server's 503, Retry-After 1 s before any batch was
    timed), another model's queue is its own, and a request alone in its queue is taken whatever its
    size. Once the decoder is free, every request taken is answered."""
    release = threading.Event()

    def held(jobs: list[Pending]) -> list[list[str]]:
        release.wait(10)
        return [[line.upper() for line in job.lines] for job in jobs]

    async def scenario() -> tuple[list, QueueFull, dict[str, int]]:
        batcher = Batcher(held, max_tokens=1000, max_wait_ms=0, max_queue=3)
        batcher.start()
        first = asyncio.create_task(batcher.submit(Pending("k", ["a"], 1, model="m")))
        await asyncio.sleep(0.05)  # taken by the decoder: no longer waiting
        taken = [asyncio.create_task(batcher.submit(Pending("k", [f"b{i}"], 1, model="m"))) for i in range(3)]
        large = asyncio.create_task(batcher.submit(Pending("k", list("vwxyz"), 5, model="n")))
        await asyncio.sleep(0.05)
        waiting = {model: batcher.waiting_lines(model) for model in ("m", "n")}
        with pytest.raises(QueueFull) as full:
            await batcher.submit(Pending("k", ["c"], 1, model="m"))
        release.set()
        results = await asyncio.gather(first, *taken, large)
        await batcher.stop()
        return results, full.value, waiting

    results, full, waiting = asyncio.run(scenario())
    assert waiting == {"m": 3, "n": 5}
    assert full.model == "m" and full.retry_after == 1
    assert str(full) == ("model=m: 3 lines are waiting to be decoded, the 3 the server queues (task.max_queue); "
                         "retry after 1 s")
    assert results == [["A"], ["B0"], ["B1"], ["B2"], list("VWXYZ")]


def test_retry_after_is_the_waiting_lines_at_the_rate_decoded_so_far():
    batcher = Batcher(lambda jobs: [], max_tokens=1000, max_wait_ms=0, concurrency=2, max_queue=10)
    batcher.lines, batcher.busy = 40, 8.0  # 5 lines a second a decoder, 10 with both
    batcher.waiting = [Pending("k", [str(i)] * 2, 2, model="m") for i in range(5)]  # 10 lines waiting
    with pytest.raises(QueueFull) as full:
        batcher.admit("m", 1)
    assert full.value.retry_after == 1  # 10 lines / 10 a second
    batcher.waiting = [Pending("k", [str(i)] * 9, 9, model="m") for i in range(5)]  # 45 lines: 4.5 s
    batcher.max_queue = 45
    with pytest.raises(QueueFull) as full:
        batcher.admit("m", 1)
    assert full.value.retry_after == 5
    batcher.admit("n", 1)  # another model's queue: its own, empty


def test_a_pool_over_the_budget_is_cut_by_length_nearest_the_oldest_first():
    """Lines of 2, 9, 3, 8 and 2 tokens wait (the server's jobs: a line each) under a 12-token budget:
    the first batch is the oldest (2) with the nearest in length that fit (2, 3), the next the oldest
    left (9) alone (8 more would pass the budget), then 8; arrival order breaks ties."""
    batches = []
    jobs = [Pending("k", [name], tokens) for name, tokens in (("a", 2), ("b", 9), ("c", 3), ("d", 8), ("e", 2))]

    async def scenario() -> list:
        batcher = Batcher(recording(batches), max_tokens=12, max_wait_ms=200)
        batcher.start()
        results = await batcher.submit_all(jobs)  # waiting together
        await batcher.stop()
        return results

    assert asyncio.run(scenario()) == [["A"], ["B"], ["C"], ["D"], ["E"]]
    assert batches == [[["a"], ["e"], ["c"]], [["b"]], [["d"]]]


def test_a_requests_jobs_are_admitted_all_or_none():
    """submit_all: a request's lines, as jobs, pass the queue's bound together or are refused
    together (nothing of them waits); taken, each gets its own result."""
    release = threading.Event()

    def held(jobs: list[Pending]) -> list[list[str]]:
        release.wait(10)
        return [[line.upper() for line in job.lines] for job in jobs]

    async def scenario() -> tuple[list, int]:
        batcher = Batcher(held, max_tokens=1000, max_wait_ms=0, max_queue=3)
        batcher.start()
        first = asyncio.create_task(batcher.submit(Pending("k", ["a"], 1, model="m")))
        await asyncio.sleep(0.05)  # being decoded
        two = asyncio.create_task(batcher.submit_all([Pending("k", [x], 1, model="m") for x in "bc"]))
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFull):
            await batcher.submit_all([Pending("k", [x], 1, model="m") for x in "de"])
        waiting = batcher.waiting_lines("m")
        release.set()
        results = await asyncio.gather(first, two)
        await batcher.stop()
        return results, waiting

    results, waiting = asyncio.run(scenario())
    assert waiting == 2  # b and c; d and e never waited
    assert results == [["A"], [["B"], ["C"]]]


def stepping(log: list, step: float = 0.03):
    """A running-batch decode (Joined's): each step answers the jobs it holds (their lines upper-cased)
    and takes those handed over; it records what it started with, what joined, and the source tokens
    in flight at each step."""
    def decode(jobs: list[Pending], inbox) -> None:
        log.append(("start", [job.lines[0] for job in jobs]))
        holding = list(jobs)
        while True:
            log.append(("in flight", inbox.tokens))
            time.sleep(step)
            for job in holding:
                inbox.answered(job, [line.upper() for line in job.lines])
            holding = inbox.take()
            log.extend(("joined", job.lines[0]) for job in holding)
            if not holding and inbox.close():
                return
    return decode


def test_jobs_that_come_while_every_thread_decodes_join_the_running_batch_within_the_budget():
    """One decoder thread, a running batch of `a`: `b` and `c`, sent while it decodes, join it at its
    next steps (never more than the 2-token budget in flight); `d`, sent after the batch ended, starts
    a batch of its own. Each job gets its own lines back."""
    log: list = []
    joined = Joined(takes=lambda job: True, decode=stepping(log))

    async def scenario() -> list:
        batcher = Batcher(lambda jobs: [], max_tokens=2, max_wait_ms=0, joined=joined)
        batcher.start()
        first = asyncio.create_task(batcher.submit(Pending("k", ["a"], 1)))
        await asyncio.sleep(0.01)  # `a` decoding
        more = [asyncio.create_task(batcher.submit(Pending("k", [x], 1))) for x in "bc"]
        results = await asyncio.gather(first, *more)
        await asyncio.sleep(0.1)  # the batch ended
        results.append(await batcher.submit(Pending("k", ["d"], 1)))
        await batcher.stop()
        return results

    assert asyncio.run(scenario()) == [["A"], ["B"], ["C"], ["D"]]
    assert [entry for entry in log if entry[0] != "in flight"] == [
        ("start", ["a"]), ("joined", "b"), ("joined", "c"), ("start", ["d"])]
    assert max(tokens for kind, tokens in log if kind == "in flight") <= 2
