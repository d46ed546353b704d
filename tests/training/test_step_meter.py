"""The step meter's timers: the host clock on a CPU, CUDA events on a GPU (their logic
checked with fake events, so it runs without CUDA), read only on logged steps."""

import time

import pytest
import torch

from tests.helpers import compose_config
from transformer_mt.tasks.train import run
from transformer_mt.training import step_meter
from transformer_mt.training.step_meter import CudaTimer, HostTimer, timer_for


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


class CountingTimer(HostTimer):
    """The host clock, counting the reads: on a GPU each read of a CudaTimer waits for the device."""

    reads: list[int] = []

    def seconds(self) -> float:
        CountingTimer.reads.append(1)
        return super().seconds()


def test_the_step_timer_is_read_once_per_logged_step_also_with_gradient_accumulation(tmp_path, monkeypatch):
    """8 optimizer steps of two batches each, logged every 2 steps: 4 reads of the timer (on a GPU,
    4 waits for the device), none on the batch after a logging step (whose global step is still
    the logged one)."""
    monkeypatch.setattr(step_meter, "timer_for", lambda device: CountingTimer())
    CountingTimer.reads = []
    metrics = run(compose_config(tmp_path, [
        "trainer.max_steps=8", "trainer.accumulate_grad_batches=2", "trainer.log_every_n_steps=2",
        "data.corpora.toy.num_train=400", "data.corpora.toy.num_val=5", "data.corpora.toy.num_test=5",
        "data.max_tokens=256", "trainer.limit_val_batches=0", "trainer.limit_test_batches=1"]))
    assert metrics["steps"] == 8 and len(CountingTimer.reads) == 4
