"""What several test modules use: composing a run's config as `python run.py` would, running
`run.py` as a process, small random models, and the checks of a clean failure. Test modules
import from here (never from one another); pytest fixtures live in conftest.py."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import lightning as L
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.run_folder import register_resolvers

ROOT = Path(__file__).resolve().parents[1]

# debug=fast (one batch of each stage) on 400 toy pairs, 20 validation and 20 test sentences
FAST = ["debug=fast", "data.corpus.num_train=400", "data.corpus.num_val=20", "data.corpus.num_test=20"]
# one epoch on 300 toy pairs, tested on 7 sentences: a checkpoint for the tests that need any
SMALL_RUN = ["trainer.max_epochs=1", "data.corpus.num_train=300", "data.corpus.num_val=10", "data.corpus.num_test=7"]


def make_model(**overrides) -> Transformer:
    """A small randomly initialised model in eval mode (vocabulary 50, pad id 0)."""
    torch.manual_seed(0)
    args = dict(src_vocab_size=50, tgt_vocab_size=50, num_encoder_layers=2, num_decoder_layers=2, d_model=32,
                d_ff=64, heads=4, dropout=0.1)
    args.update(overrides)
    return Transformer(TransformerConfig(**args)).eval()


def padded_sources() -> torch.Tensor:
    """Four random source rows of 9, 4, 6 and 2 tokens (the last one EOS, id 2), padded with 0."""
    torch.manual_seed(1)
    src = torch.randint(4, 50, (4, 9))
    src[:, -1] = 2
    for row, length in enumerate([9, 4, 6, 2]):
        src[row, length - 1] = 2
        src[row, length:] = 0
    return src


def padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """padded_sources() and four target rows of 6, 3, 5 and 1 tokens (BOS first), padded with 0."""
    src = padded_sources()
    tgt = torch.randint(4, 50, (4, 6))
    tgt[:, 0] = 1
    for row, length in enumerate([6, 3, 5, 1]):
        tgt[row, length:] = 0
    return src, tgt


def compose_config(output_dir: Path, overrides: list[str] | None = None, cache_dir: Path | None = None) -> DictConfig:
    """The config `python run.py OVERRIDES` would see, with its run directory at output_dir and
    its cache at cache_dir (default: output_dir/.cache)."""
    register_resolvers()  # as run.py does
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


def run_py(*args: str, cwd=ROOT, timeout: int = 600, cores: set[int] | None = None) -> subprocess.CompletedProcess:
    """`python run.py ARGS` as a process: its exit status, stdout and stderr (`cores`: the CPU cores
    it may run on; None: all)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    pin = None if cores is None else (lambda: os.sched_setaffinity(0, cores))
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=pin)


def assert_clean_failure(result: subprocess.CompletedProcess, expected: str) -> None:
    """Exit status 1, no traceback, and a last line `error: ...` that contains `expected`."""
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and expected in last, last


def assert_nothing_half_written(tmp_path: Path) -> None:
    """No temporary entry in the cache; the run directory keeps only what was asked and why it
    failed (config.yaml, .hydra/, run.log), as docs/faults.md says."""
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(p.name.startswith(".") for p in cache.iterdir())
    run_dir = tmp_path / "run"
    assert not run_dir.exists() or {p.name for p in run_dir.iterdir()} <= {"config.yaml", ".hydra", "run.log"}


def files_run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    """One epoch of `python run.py data=files` on the corpus in tmp_path/corpus."""
    return run_py("data=files", f"data.corpus.data_dir={tmp_path}/corpus", f"hydra.run.dir={tmp_path}/run",
                  f"paths.cache_dir={tmp_path}/cache", "trainer.max_epochs=1", *extra)


def write(folder: Path, name: str, data: bytes) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)


def good_corpus(folder: Path) -> None:
    """Two pairs in each of train / val / test ({split}.en, {split}.de)."""
    for split in ("train", "val", "test"):
        write(folder, f"{split}.en", b"a small cat\nthe dog\n")
        write(folder, f"{split}.de", b"eine kleine Katze\nder Hund\n")


def ragged_batch(src_lengths: list[int], tgt_lengths: list[int], seed: int = 0, vocab: int = 50,
                 packed: bool = False) -> dict:
    """The Collator's batch (padded, or packed) of random sentence pairs of these lengths (sources
    ending in EOS, id 2; BOS 1, pad 0): the same seed gives the same sentences either way."""
    import numpy as np
    import pyarrow as pa

    from transformer_mt.data.batching import Collator

    rng = np.random.default_rng(seed)
    src = [[*rng.integers(4, vocab, n - 1).tolist(), 2] for n in src_lengths]
    tgt = [rng.integers(4, vocab, n).tolist() for n in tgt_lengths]
    rows = pa.table({"src_ids": pa.array(src, pa.list_(pa.int32())), "tgt_ids": pa.array(tgt, pa.list_(pa.int32())),
                     "id": pa.array(range(len(src)), pa.int64())})
    return Collator(0, 1, 2, packed=packed)(rows)


def load_script(path: str):
    """A script of the project (not a package, e.g. experiments/benchmarks/train_speed.py) as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Interrupt(L.Callback):
    """Sends `signal_name` to its own process before optimizer step `step` (a run's callback:
    `interrupt_at`)."""

    def __init__(self, step: int, signal_name: str = "SIGKILL") -> None:
        self.step, self.signal = step, getattr(signal, signal_name)

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), self.signal)


class Mark(L.Callback):
    """Rank 0 writes `mark: step N` to stderr when the batch that makes optimizer step `step` ends."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step and trainer.is_global_zero:
            print(f"mark: step {self.step}", file=sys.stderr, flush=True)


def mark_at(step: int) -> list[str]:
    """The overrides that make rank 0 of a run write `mark: step N` when step `step` is done."""
    return [f"+callbacks.mark._target_={__name__}.Mark", f"+callbacks.mark.step={step}"]


def interrupt_at(step: int, signal_name: str = "SIGKILL") -> list[str]:
    """The overrides that make a run send itself `signal_name` before optimizer step `step`."""
    return [f"+callbacks.interrupt._target_={__name__}.Interrupt", f"+callbacks.interrupt.step={step}",
            f"+callbacks.interrupt.signal_name={signal_name}"]
