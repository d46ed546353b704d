"""Shared fixtures: small random models and Hydra compose helpers."""

import os
import tempfile
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from transformer_mt.model import Transformer, TransformerConfig

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
# runs started by tests (also `python run.py` subprocesses) cache data here, not in the project
os.environ.setdefault("TRANSFORMER_MT_CACHE", tempfile.mkdtemp(prefix="transformer-mt-test-cache-"))


def make_model(**overrides) -> Transformer:
    """A small randomly initialised model in eval mode (vocabulary 50, pad id 0)."""
    torch.manual_seed(0)
    args = dict(src_vocab_size=50, tgt_vocab_size=50, num_encoder_layers=2, num_decoder_layers=2, d_model=32,
                d_ff=64, heads=4, dropout=0.1)
    args.update(overrides)
    return Transformer(TransformerConfig(**args)).eval()


def compose_config(output_dir: Path, overrides: list[str] | None = None, cache_dir: Path | None = None) -> DictConfig:
    """The config `python run.py OVERRIDES` would see, with its run directory at output_dir and
    its cache at cache_dir (default: output_dir/.cache)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose(config_name="config", return_hydra_config=True, overrides=overrides or [])
    with open_dict(cfg):
        cfg.paths.output_dir = str(output_dir)
        cfg.paths.cache_dir = str(cache_dir or Path(output_dir) / ".cache")
        cfg.hydra.runtime.output_dir = str(output_dir)
        cfg.hydra.job.num = 0
    HydraConfig().set_config(cfg)
    return cfg


@pytest.fixture
def model() -> Transformer:
    return make_model()


@pytest.fixture(scope="session")
def toy_run(tmp_path_factory) -> tuple[Path, dict]:
    """The default job, exactly `python run.py` (2-3 minutes on 2 cores): its run directory and metrics."""
    from transformer_mt.tasks import run

    out = tmp_path_factory.mktemp("toy_run")
    return out, run(compose_config(out, []))


# one epoch on 300 toy pairs, tested on 7 sentences: a checkpoint for the tests that need any
SMALL_RUN = ["trainer.max_epochs=1", "data.corpus.num_train=300", "data.corpus.num_val=10", "data.corpus.num_test=7"]


@pytest.fixture(scope="session")
def small_run(tmp_path_factory) -> tuple[Path, dict]:
    """`python run.py SMALL_RUN` (it need not translate well): its run directory and metrics."""
    from transformer_mt.tasks import run

    out = tmp_path_factory.mktemp("small_run")
    return out, run(compose_config(out, SMALL_RUN))


@pytest.fixture
def small_checkpoint(small_run) -> Path:
    return small_run[0] / "checkpoints" / "last.ckpt"
