"""Decoders on threads (inter_threads, intra_threads): the defaults, results in order, the decoders
at work at once each with its own torch threads, and the calling thread's threads given back."""

import threading

import pytest
import torch

from transformer_mt.inference.workers import SERIAL, Workers, thread_counts

CPU, GPU = torch.device("cpu"), torch.device("cuda")


@pytest.mark.parametrize("inter, intra, device, available, expected", [
    (None, None, CPU, 8, (8, 1)),  # the default on the CPU: one one-thread decoder per core
    (None, None, CPU, 1, (1, 1)),
    (2, None, CPU, 8, (2, 4)),  # the cores shared out among the decoders
    (None, 4, CPU, 8, (2, 4)),
    (None, 16, CPU, 8, (1, 16)),
    (3, 3, CPU, 2, (3, 3)),  # as asked, even beyond the cores
    (None, None, GPU, 8, (1, 8)),  # one decoder on a GPU
    (4, 2, GPU, 8, (1, 2)),
])
def test_thread_counts(inter, intra, device, available, expected):
    assert thread_counts(inter, intra, device, available) == expected


def test_decoders_work_at_once_each_with_its_threads_and_results_come_in_order():
    met = threading.Barrier(2, timeout=30)  # both decoders must be inside fn at once to pass it
    seen: list[tuple[str, int]] = []

    def fn(item: int) -> int:
        if item < 2:
            met.wait()
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return item * item

    with Workers(2, 1) as workers:
        assert list(workers.map(fn, range(10))) == [i * i for i in range(10)]
    assert len({name for name, _ in seen}) == 2 and {threads for _, threads in seen} == {1}
    assert threading.current_thread().name not in {name for name, _ in seen}


def test_one_decoder_runs_in_the_calling_thread_and_gives_its_threads_back():
    before = torch.get_num_threads()
    intra = before + 1
    with Workers(1, intra) as workers:
        got = list(workers.map(lambda _: (threading.current_thread().name, torch.get_num_threads()), range(3)))
    assert got == [(threading.current_thread().name, intra)] * 3
    assert torch.get_num_threads() == before
    assert list(SERIAL.map(lambda _: torch.get_num_threads(), range(2))) == [before, before]


def test_an_error_in_a_decoder_reaches_the_caller():
    def fn(item: int) -> int:
        if item == 3:
            raise ValueError("bad batch")
        return item

    with Workers(2, 1) as workers, pytest.raises(ValueError, match="bad batch"):
        list(workers.map(fn, range(6)))
