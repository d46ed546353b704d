"""The step timers of TrainingHealth: the host clock on a CPU, CUDA events on a GPU (their logic
checked with fake events, so it runs without CUDA)."""

import time

import pytest
import torch

from transformer_mt.training.health import CudaTimer, HostTimer, timer_for


def test_host_timer_measures_a_sleep():
    timer = HostTimer()
    timer.start()
    time.sleep(0.05)
    timer.stop()
    assert 0.045 <= timer.seconds() < 0.5


class FakeEvent:
    """A CUDA event's interface: record(), synchronize(), elapsed_time(other) in milliseconds."""

    clock = 0.0  # milliseconds, advanced by the test

    def __init__(self, log: list[str]) -> None:
        self.log, self.at = log, None

    def record(self) -> None:
        self.log.append("record")
        self.at = FakeEvent.clock

    def synchronize(self) -> None:
        self.log.append("synchronize")

    def elapsed_time(self, other: "FakeEvent") -> float:
        assert self.log[-1] == "synchronize", "read before the stop event was waited for"
        return other.at - self.at


def test_cuda_timer_records_events_and_reads_them_only_when_asked():
    log: list[str] = []
    made: list[FakeEvent] = []
    timer = CudaTimer(event=lambda: made.append(FakeEvent(log)) or made[-1])
    assert made == []  # no event (no CUDA call) before the first start
    for start_ms, stop_ms in ((10.0, 60.0), (100.0, 125.0)):
        FakeEvent.clock = start_ms
        timer.start()
        FakeEvent.clock = stop_ms
        timer.stop()
    assert len(made) == 2  # the two events are reused step after step
    assert log == ["record"] * 4  # timing never waits for the device
    assert timer.seconds() == pytest.approx(0.025)  # the last step, in seconds
    assert log[-1] == "synchronize"


def test_timer_for_picks_events_on_cuda_and_the_host_clock_elsewhere():
    assert type(timer_for(torch.device("cuda"))) is CudaTimer
    assert type(timer_for(torch.device("cuda", 1))) is CudaTimer
    assert type(timer_for(torch.device("cpu"))) is HostTimer
