"""Fixtures: a small random model, and the runs several tests read (the default job, a small one, a
small one under DDP).
Helpers that tests call live in tests/helpers.py.

`make test` runs the suite on both cores with pytest-xdist (`-n 2`): each worker process uses one
torch thread (two workers of two threads each on two cores slow each other down far more than 2x),
and the shared runs are trained once per session, by whichever worker asks first (the others wait
on a file lock; the test order below keeps that wait short)."""

import json
import os
import platform
import tempfile
from pathlib import Path

import pytest
import torch
from filelock import FileLock

from tests.helpers import (
    DDP_RUN,
    PROFILE_VARIABLES,
    ROOT,
    SMALL_RUN,
    compose_config,
    keep_epoch_end,
    make_model,
    once_per_session,
    record_steps,
    run_py,
    session_folder,
)
from transformer_mt.model import Transformer

os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no test reaches the hub (nor do warm runs then differ)
# runs started by tests (also `python run.py` subprocesses) cache data here, not in the project
os.environ.setdefault("TRANSFORMER_MT_CACHE", tempfile.mkdtemp(prefix="transformer-mt-test-cache-"))
if os.environ.get("PYTEST_XDIST_WORKER"):  # one of pytest-xdist's workers: one thread each, also in subprocesses
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # inductor compiles in-process, no pool of compilers
    torch.set_num_threads(1)


def cpu_model() -> str:
    """The CPU's name as Linux gives it (`model name` in /proc/cpuinfo), or the platform's."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    names = [line.partition(":")[2].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def pytest_report_header() -> str:
    """The CPU and the numeric profile the suite computes with, at the top of every report."""
    held = " ".join(f"{name}={os.environ[name]}" for name in PROFILE_VARIABLES if name in os.environ)
    return (f"numeric profile: {cpu_model()}, torch computing with {torch.backends.cpu.get_cpu_capability()}, "
            + (held or "every library on this CPU's own code path"))


def pytest_configure(config: pytest.Config) -> None:
    """A profile that did not take (a capability this CPU lacks, a torch that ignores it) stops the
    run: a second pass that computed as the first would pass for what it is not."""
    asked = os.environ.get("ATEN_CPU_CAPABILITY")
    if asked and torch.backends.cpu.get_cpu_capability() != asked.upper():
        raise pytest.UsageError(f"ATEN_CPU_CAPABILITY={asked}, but torch computes with "
                                f"{torch.backends.cpu.get_cpu_capability()}: the numeric profile did not take")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The order that keeps both pytest-xdist workers busy to the end: one test of the default job
    first (its worker trains the shared run while the other takes independent tests), then the
    independent end-to-end tests (runs and processes: the long ones, so that no long test is left
    for the end), then the other independent tests, then those that read a shared run (the runs are
    there by then: nobody waits)."""
    def rank(item: pytest.Item) -> int:
        if {"toy_run", "small_run"} & set(getattr(item, "fixturenames", ())):
            return 3
        return 1 if {"e2e", "interop"} & set(Path(str(item.path)).parts) else 2

    first = next((i for i in items if "toy_run" in getattr(i, "fixturenames", ())), None)
    items.sort(key=lambda item: 0 if item is first else rank(item))  # stable: files keep their order


@pytest.fixture
def model() -> Transformer:
    return make_model()


def shared_run(tmp_path_factory, name: str, overrides: list[str]) -> tuple[Path, dict]:
    """`python run.py OVERRIDES`, run once per test session, also across pytest-xdist workers: the
    first worker to ask trains it in a folder they share, the others wait for it (a file lock), and
    every one reads its metrics.json. Its run directory and metrics."""
    from transformer_mt.tasks import run

    root = session_folder(tmp_path_factory)
    out, metrics = root / name, root / name / "metrics.json"
    with FileLock(str(root / f"{name}.lock")):
        if not metrics.is_file():
            run(compose_config(out, overrides))
    return out, json.loads(metrics.read_text())


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory) -> tuple[Path, dict]:
    """The default job, exactly `python run.py` (about 2 minutes on 2 cores): its run directory and metrics."""
    return shared_run(tmp_path_factory, "toy_run", [])


@pytest.fixture(scope="session")
def small_run(tmp_path_factory) -> tuple[Path, dict]:
    """`python run.py SMALL_RUN` (it need not translate well): its run directory and metrics."""
    return shared_run(tmp_path_factory, "small_run", SMALL_RUN)


@pytest.fixture(scope="session")
def ddp_run(tmp_path_factory) -> Path:
    """`python run.py DDP_RUN` (two processes: trainer=ddp_cpu) with each rank's training batches
    recorded (steps.jsonl.RANK) and the last.ckpt of the end of epoch 0 kept (epoch0_last.ckpt): its
    folder (the run directory is run/, the data cache cache/)."""
    def make(folder: Path) -> None:
        result = run_py(*DDP_RUN, *record_steps(folder / "steps.jsonl"), *keep_epoch_end(folder / "epoch0_last.ckpt"),
                        f"paths.cache_dir={folder}/cache", f"hydra.run.dir={folder}/run", timeout=900)
        assert result.returncode == 0, result.stderr[-3000:]

    return once_per_session(tmp_path_factory, "ddp_run", make)


@pytest.fixture
def small_checkpoint(small_run) -> Path:
    return small_run[0] / "checkpoints" / "last.ckpt"
