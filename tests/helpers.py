"""What several test modules use: composing a run's config as `python run.py` would, running
`run.py` as a process, small random models, and the checks of a clean failure. Test modules
import from here (never from one another); pytest fixtures live in conftest.py."""

import atexit
import copy
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import lightning as L
import torch
from filelock import FileLock
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from tests.warm_start import Server
from transformer_mt.errors import ConfigError
from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.run_folder import register_resolvers
from transformer_mt.schema.keys import check_keys
from transformer_mt.tasks.options import register
from transformer_mt.training.last_checkpoint import LastCheckpoint

ROOT = Path(__file__).resolve().parents[1]

# debug=fast (one batch of each stage) on 400 toy pairs, 20 validation and 20 test sentences
FAST = ["debug=fast", "data.corpora.toy.num_train=400", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20"]
# one epoch on 300 toy pairs, tested on 7 sentences: a checkpoint for the tests that need any
SMALL_RUN = ["trainer.max_epochs=1", "data.corpora.toy.num_train=300", "data.corpora.toy.num_val=10",
             "data.corpora.toy.num_test=7"]
# two processes (trainer=ddp_cpu) for 2 epochs of 10 batches each on 600 toy pairs, 2 batches an
# optimizer step (2 processes x 512 tokens x accumulation 2), last.ckpt every 4 steps: the run of
# conftest's `ddp_run`, which the DDP tests compare theirs with
DDP_RUN = ["data.corpora.toy.num_train=600", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20",
           "data.max_tokens=512", "~callbacks.epoch_checkpoint", "callbacks.last_checkpoint.every_n_steps=4",
           "trainer=ddp_cpu", "trainer.max_epochs=2", "tokens_per_update=2048"]


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


# what holds one machine's arithmetic to another's code path (make test-portable; docs/layout.md)
PROFILE_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "CT2_FORCE_CPU_ISA")

_composer: list = [None]  # the Hydra instance compose_config set up (another one, or none: set up again)


@functools.lru_cache(maxsize=256)
def composed(overrides: tuple[str, ...], cwd: str) -> DictConfig:
    """Hydra's composition of `overrides` (from `cwd`: Hydra records it), made once a process: a
    composition takes 0.2 s, a copy of it 7 ms, and the suite composes the same overrides many times
    (compose_config hands out copies; a config store changed by a test, a new task, is a new key)."""
    return compose(config_name="config", return_hydra_config=True, overrides=list(overrides))


def compose_config(output_dir: Path, overrides: list[str] | None = None, cache_dir: Path | None = None) -> DictConfig:
    """The config `python run.py OVERRIDES` would see, with its run directory at output_dir and
    its cache at cache_dir (default: output_dir/.cache)."""
    register_resolvers()  # as run.py does
    register()
    hydra = GlobalHydra.instance()
    if not (hydra.is_initialized() and hydra.hydra is _composer[0]):  # Hydra set up once a process (0.1 s)
        hydra.clear()
        initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf"))
        _composer[0] = hydra.hydra
    cfg = copy.deepcopy(composed(tuple(overrides or ()), os.getcwd()))
    with open_dict(cfg):
        cfg.paths.output_dir = str(output_dir)
        cfg.paths.cache_dir = str(cache_dir or Path(output_dir) / ".cache")
        cfg.hydra.runtime.output_dir = str(output_dir)
        cfg.hydra.job.num = 0
    HydraConfig().set_config(cfg)
    return cfg


def schema_refusal(output_dir: Path, key: str, value: object, *overrides: str) -> str:
    """The schema's one line refusing `key`=`value` (a Python value, written as the command line
    writes it) with `overrides`, or '' if the composed config passes."""
    written = "null" if value is None else str(value).lower() if isinstance(value, bool) else \
        f"'{value}'" if isinstance(value, str) else str(value)
    try:
        check_keys(compose_config(output_dir, [*overrides, f"{key}={written}"]))
    except ConfigError as err:
        return str(err)
    return ""


_warm: list[Server] = []  # this worker's warm server, once started
# environment variables that a library reads when it is imported: a run whose value differs from
# the warm server's gets a plain process (the others reach the forked process as they are;
# PYTHONUNBUFFERED: warm.py sets its streams up as the interpreter would)
READ_AT_IMPORT = ("HF_", "TRANSFORMERS_", "TORCH", "OMP_", "MKL_", "PYTHON", "CUDA", "LD_", "TOKENIZERS_", "ATEN_",
                  "ONEDNN_", "CT2_")


def warm_server(env: dict[str, str]) -> Server | None:
    """This worker's warm server (tests/warm_start.py), started on first use, if it can serve `env`."""
    if not _warm:
        _warm.append(Server(env))
        atexit.register(_warm[0].close)
        if not _warm[0].ready():
            _warm[0].env = {}  # it did not start: every run gets a plain process
    server = _warm[0]
    differ = {k for k in env.keys() | server.env.keys() if env.get(k) != server.env.get(k)} - {"PYTHONUNBUFFERED"}
    ok = server.env and not any(k.startswith(READ_AT_IMPORT) for k in differ)
    return server if ok else None


def python(env: dict[str, str]) -> str:
    """The `python` for a test's own `python run.py ...` process with environment `env`: one that
    forks it from this worker's warm server where it can (tests/warm_start.py), sys.executable else."""
    server = warm_server(env)
    return server.python if server is not None else sys.executable


def run_py(*args: str, cwd=ROOT, timeout: int = 600, cores: set[int] | None = None,
           input: str | bytes = b"", warm: bool = True) -> subprocess.CompletedProcess:
    """`python run.py ARGS` as a process with `input` on its stdin: its exit status, stdout and
    stderr as text (`cores`: the CPU cores it may run on; None: all). Forked from this worker's warm
    server where it can be and `warm` (the same process as a plain one would be, minus the imports:
    tests/warm_start.py)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    data = input.encode() if isinstance(input, str) else input
    server = warm_server(env) if warm else None
    if server is not None:
        return server.run(list(args), Path(cwd), timeout, data, env, cores)
    pin = None if cores is None else (lambda: os.sched_setaffinity(0, cores))
    result = subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, env=env, input=data,
                            capture_output=True, timeout=timeout, preexec_fn=pin)
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode("utf-8", "replace"),
                                       result.stderr.decode("utf-8", "replace"))


def session_folder(tmp_path_factory) -> Path:
    """The test session's folder, which every pytest-xdist worker shares (each has its own below it)."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


def once_per_session(tmp_path_factory, name: str, make: Callable[[Path], None]) -> Path:
    """Folder `name` of the test session, filled by `make(folder)` once per session, also across
    pytest-xdist workers: the first worker to ask makes it, the others wait for it (a file lock).
    (A module's fixture made here is made once, however often pytest sets the fixture up again.)"""
    root = session_folder(tmp_path_factory)
    folder, done = root / name, root / f"{name}.done"
    with FileLock(str(root / f"{name}.lock")):
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed try left
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


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
    return run_py("data=files", f"data.corpora.files.data_dir={tmp_path}/corpus", f"hydra.run.dir={tmp_path}/run",
                  f"paths.cache_dir={tmp_path}/cache", "trainer.max_epochs=1", *extra)


def toy_checkpoint_copy(run_dir: Path, tmp_path: Path) -> Path:
    """A run's best.ckpt copied into tmp_path/model (what converts or builds beside a checkpoint
    writes there, not into the shared run), with the toy test set's 300 sources in tmp_path/in.txt."""
    from transformer_mt.data.toy import ToyCorpus

    (tmp_path / "model").mkdir()
    shutil.copy(run_dir / "checkpoints" / "best.ckpt", tmp_path / "model" / "best.ckpt")
    (tmp_path / "in.txt").write_text("\n".join(ToyCorpus().load("test").src) + "\n")
    return tmp_path / "model" / "best.ckpt"


def not_our_checkpoint(path: Path) -> Path:
    """A torch file that is no transformer-mt checkpoint at `path`: it passes the checks made before
    torch is imported (a zip file), and loading it would stop the run with another error than the
    one a test expects first."""
    torch.save({"weights": torch.zeros(3)}, path)
    return path


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


class Interrupt(L.Callback):
    """Sends `signal_name` to its own process before optimizer step `step` (a run's callback:
    `interrupt_at`)."""

    def __init__(self, step: int, signal_name: str = "SIGKILL") -> None:
        self.step, self.signal = step, getattr(signal, signal_name)

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), self.signal)


class SignalAt(L.Callback):
    """Sends `signal_name` to its own process at `point` of a training run: `built` (as the run is
    built, before fitting), `fit_end` (fitting done, before testing), `test_start` or `test_end`
    (while testing). A run's callback: `signal_at`."""

    def __init__(self, point: str, signal_name: str) -> None:
        assert point in ("built", "fit_end", "test_start", "test_end"), point
        self.point, self.signal = point, getattr(signal, signal_name)
        if point == "built":
            self.send()

    def send(self) -> None:
        os.kill(os.getpid(), self.signal)

    def on_fit_end(self, trainer, module) -> None:
        if self.point == "fit_end":
            self.send()

    def on_test_start(self, trainer, module) -> None:
        if self.point == "test_start":
            self.send()

    def on_test_end(self, trainer, module) -> None:
        if self.point == "test_end":
            self.send()


def signal_at(point: str, signal_name: str) -> list[str]:
    """The overrides that make a training run send itself `signal_name` at `point` (SignalAt)."""
    return [f"+callbacks.signal_at._target_={__name__}.SignalAt", f"+callbacks.signal_at.point={point}",
            f"+callbacks.signal_at.signal_name={signal_name}"]


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


class StepRecorder(L.Callback):
    """Appends [epoch, step, example ids] of every training batch to a JSON-lines file (under DDP,
    one file per rank: PATH.RANK)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        path = self.path if trainer.world_size == 1 else Path(f"{self.path}.{trainer.global_rank}")
        with path.open("a") as f:
            f.write(json.dumps([trainer.current_epoch, trainer.global_step, batch["id"].tolist()]) + "\n")


def record_steps(path: Path) -> list[str]:
    """The overrides that make a run record its training batches in `path` (StepRecorder)."""
    return [f"+callbacks.recorder._target_={__name__}.StepRecorder", f"+callbacks.recorder.path={path}"]


def recorded_steps(path: Path) -> list[list]:
    """What StepRecorder wrote: [epoch, step, example ids] per training batch."""
    return [json.loads(line) for line in path.read_text().splitlines()]


class KeepEpochEnd(L.Callback):
    """Rank 0 copies checkpoints/last.ckpt to `path` as training epoch `epoch` starts: the last.ckpt
    written at the end of the epoch before, the state a run stopped there (max_epochs) resumes from."""

    def __init__(self, path: str, epoch: int = 1) -> None:
        self.path, self.epoch = Path(path), epoch

    def on_train_epoch_start(self, trainer, module) -> None:
        if trainer.current_epoch == self.epoch and trainer.is_global_zero:
            last = next(c.path for c in trainer.callbacks if isinstance(c, LastCheckpoint))
            shutil.copyfile(last, self.path)


def keep_epoch_end(path: Path, epoch: int = 1) -> list[str]:
    """The overrides that make a run keep the last.ckpt of the end of epoch `epoch - 1` in `path`."""
    return [f"+callbacks.keep._target_={__name__}.KeepEpochEnd", f"+callbacks.keep.path={path}",
            f"+callbacks.keep.epoch={epoch}"]


def stopped_in_the_third_chunk(finished: Path, copy: Path, later: list[str]) -> Path:
    """A copy of a finished pipeline's folder as a kill while its synthetic stage wrote its third
    chunk leaves it: two chunks done, nothing joined, the stage not done, the `later` stages gone."""
    shutil.copytree(finished, copy)
    for leftover in ["chunks/00002.in", "chunks/00002.out", "train.src", "train.tgt"]:
        (copy / "synthetic" / leftover).unlink()
    record = copy / "synthetic" / "stage.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "done": False}))
    for stage in later:
        shutil.rmtree(copy / stage)
    return copy
