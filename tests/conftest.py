"""Fixtures: a small random model, and the runs several tests read (the default job, a small one).
Helpers that tests call live in tests/helpers.py."""

import os
import tempfile
from pathlib import Path

import pytest

from tests.helpers import ROOT, SMALL_RUN, compose_config, make_model
from transformer_mt.model import Transformer

os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
# runs started by tests (also `python run.py` subprocesses) cache data here, not in the project
os.environ.setdefault("TRANSFORMER_MT_CACHE", tempfile.mkdtemp(prefix="transformer-mt-test-cache-"))


@pytest.fixture
def model() -> Transformer:
    return make_model()


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory) -> tuple[Path, dict]:
    """The default job, exactly `python run.py` (2-3 minutes on 2 cores): its run directory and metrics."""
    from transformer_mt.tasks import run

    out = tmp_path_factory.mktemp("toy_run")
    return out, run(compose_config(out, []))


@pytest.fixture(scope="session")
def small_run(tmp_path_factory) -> tuple[Path, dict]:
    """`python run.py SMALL_RUN` (it need not translate well): its run directory and metrics."""
    from transformer_mt.tasks import run

    out = tmp_path_factory.mktemp("small_run")
    return out, run(compose_config(out, SMALL_RUN))


@pytest.fixture
def small_checkpoint(small_run) -> Path:
    return small_run[0] / "checkpoints" / "last.ckpt"
