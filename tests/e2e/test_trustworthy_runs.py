"""Runs that can be trusted: a new batch order every epoch, resume (end of epoch, mid-epoch, after
kill -9, after a kill during a checkpoint write, after SIGTERM) that gives bit-identical weights,
and a NaN loss that stops training without touching the checkpoints."""

import io
import json
import math
import os
import signal
from pathlib import Path

import lightning as L
import pytest
import torch

from tests.helpers import DDP_RUN, compose_config, interrupt_at, mark_at, once_per_session, run_py
from tests.helpers import record_steps as record
from tests.helpers import recorded_steps as steps
from transformer_mt.atomic import atomic_file
from transformer_mt.errors import TrainingDiverged
from transformer_mt.tasks import run
from transformer_mt.training.atomic_io import AtomicCheckpointIO

pytestmark = pytest.mark.slow
EVERY = 4  # last.ckpt every EVERY steps
NUM_TRAIN = 600  # training pairs of the runs below
SMALL = [f"data.corpora.toy.num_train={NUM_TRAIN}", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20",
         "data.max_tokens=512", "~callbacks.epoch_checkpoint", f"callbacks.last_checkpoint.every_n_steps={EVERY}"]


class DieWritingACheckpoint(AtomicCheckpointIO):
    """The run's own checkpoint writer, until the first checkpoint at or after step `step`: of that
    one it writes half the bytes into the temporary file, then kills its own process (SIGKILL)."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        if checkpoint["global_step"] < self.step:
            return super().save_checkpoint(checkpoint, path, storage_options)
        whole = io.BytesIO()
        torch.save(checkpoint, whole)
        with atomic_file(path) as tmp:
            tmp.write_bytes(whole.getvalue()[: len(whole.getvalue()) // 2])
            os.kill(os.getpid(), signal.SIGKILL)


class NanLossFrom(L.Callback):
    """From optimizer step `step` on, the decoder's output is NaN, so the loss is NaN; checks that
    the steps skipped since then changed no weight."""

    def __init__(self, step: int) -> None:
        self.step, self.hook, self.before = step, None, None

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            self.before = {k: v.clone() for k, v in module.model.state_dict().items()}
            self.hook = module.model.decoder_norm.register_forward_hook(lambda m, args, out: out * math.nan)
        elif self.before is not None:
            now = module.model.state_dict()
            assert all(torch.equal(now[k], v) for k, v in self.before.items()), "a skipped step changed weights"


def interrupt(step: int, signal_name: str = "SIGKILL", during_save: bool = False) -> list[str]:
    if during_save:
        return [f"trainer.plugins=[{{_target_:{__name__}.DieWritingACheckpoint,step:{step}}}]"]
    return interrupt_at(step, signal_name)


def weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    return torch.load(checkpoint, map_location="cpu", weights_only=True)["state_dict"]


def assert_bit_identical(a: Path, b: Path) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    different = [name for name in wa if not torch.equal(wa[name], wb[name])]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, list[list], Path]:
    """An uninterrupted 2-epoch run: its directory, its batches, its cache. Run once per test session
    (pytest sets a module's fixture up again after another module's tests, and each xdist worker would)."""
    def make(root: Path) -> None:
        run(compose_config(root / "run", [*SMALL, "trainer.max_epochs=2", *record(root / "steps.jsonl")],
                           cache_dir=root / "cache"))

    root = once_per_session(tmp_path_factory, "trustworthy_reference", make)
    return root / "run", steps(root / "steps.jsonl"), root / "cache"


def test_every_epoch_has_its_own_batch_order_from_seed_and_epoch(reference, tmp_path):
    """Batch ids of epochs 0 and 1 of the reference run: each epoch sees every training example once,
    in an order of its own, and that order is the sampler's for (seed, epoch)."""
    _, batches, cache = reference
    by_epoch = {e: [ids for epoch, _, ids in batches if epoch == e] for e in range(2)}
    assert len(by_epoch[0]) == len(by_epoch[1]) > 10
    for epoch_batches in by_epoch.values():
        assert sorted(i for ids in epoch_batches for i in ids) == list(range(NUM_TRAIN))
    assert by_epoch[0] != by_epoch[1] and by_epoch[0][0] != by_epoch[1][0]
    # the same order again from the datamodule's sampler, given only (seed, epoch)
    from hydra.utils import instantiate

    datamodule = instantiate(compose_config(tmp_path / "again", SMALL, cache_dir=cache).data)
    sampler = datamodule.train_dataloader().batch_sampler
    for epoch in range(2):
        sampler.set_epoch(epoch)
        assert list(sampler) == by_epoch[epoch]


@pytest.mark.parametrize("same_directory", [False, True])
def test_resume_from_an_end_of_epoch_last_checkpoint(reference, tmp_path, same_directory):
    ref_dir, ref_steps, cache = reference
    first = tmp_path / "first"
    run(compose_config(first, [*SMALL, "trainer.max_epochs=1"], cache_dir=cache))
    last = first / "checkpoints" / "last.ckpt"
    steps_per_epoch = len(ref_steps) // 2
    assert torch.load(last, weights_only=True)["global_step"] == steps_per_epoch
    resumed = first if same_directory else tmp_path / "resumed"
    metrics = run(compose_config(resumed, [*SMALL, "trainer.max_epochs=2", f"ckpt_path={last}",
                                           *record(tmp_path / "rest.jsonl")], cache_dir=cache))
    assert metrics["steps"] == 2 * steps_per_epoch and metrics["val/bleu_best"] is not None
    assert steps(tmp_path / "rest.jsonl") == ref_steps[steps_per_epoch:]
    assert_bit_identical(resumed / "checkpoints" / "last.ckpt", ref_dir / "checkpoints" / "last.ckpt")
    # the learning curve restarts from the checkpoint's history: both validations are on it
    curve = (resumed / "plots" / "curves.csv").read_text().splitlines()
    assert [int(line.split(",")[0]) for line in curve if ",val/bleu," in line] == [steps_per_epoch, 2 * steps_per_epoch]
    if same_directory:  # the curve of the first part is kept beside the new one
        first_curve = (first / "csv" / "metrics.part1.csv").read_text()
        assert "val/bleu" in first_curve and (first / "csv" / "metrics.csv").is_file()


def kill_and_resume(tmp_path: Path, cache: Path, how: list[str]) -> tuple[Path, int]:
    """A 2-epoch run killed as `how` says, then resumed in its own directory from last.ckpt."""
    result = run_py(*SMALL, "trainer.max_epochs=2", *how, f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={cache}")
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    saved_step = torch.load(last, weights_only=True)["global_step"]  # loadable: never half-written
    run(compose_config(tmp_path / "run", [*SMALL, "trainer.max_epochs=2", f"ckpt_path={last}",
                                          *record(tmp_path / "rest.jsonl")], cache_dir=cache))
    return tmp_path / "run", saved_step


def test_kill_9_during_a_checkpoint_write_then_resume_is_bit_identical(reference, tmp_path):
    """SIGKILL half-way through writing last.ckpt at step 24 (epoch 1): the one of step 20 stays, and
    the run resumed from it ends with the reference's weights. (A SIGKILL mid-step, before step 10:
    test_the_same_command_with_ckpt_path_last_..., whose first run it is.)"""
    ref_dir, ref_steps, cache = reference
    steps_per_epoch = len(ref_steps) // 2
    assert 20 < steps_per_epoch + 4 < 24
    run_dir, saved = kill_and_resume(tmp_path / "in_save", cache, interrupt(24, during_save=True))
    assert saved == 24 - EVERY
    assert steps(tmp_path / "in_save" / "rest.jsonl") == ref_steps[saved:]
    assert_bit_identical(run_dir / "checkpoints" / "last.ckpt", ref_dir / "checkpoints" / "last.ckpt")
    assert not [p for p in (run_dir / "checkpoints").iterdir() if p.name.startswith(".")]  # stale temp file removed


def test_sigterm_saves_a_checkpoint_and_exits_with_143_then_resume_is_bit_identical(reference, tmp_path):
    ref_dir, ref_steps, cache = reference
    result = run_py(*SMALL, "trainer.max_epochs=2", *interrupt(13, "SIGTERM"), f"hydra.run.dir={tmp_path}/run",
                    f"paths.cache_dir={cache}")
    assert result.returncode == 143, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert result.stderr.strip().splitlines()[-1] == \
        f"stopped by SIGTERM at step 14; {last} holds step 14: resume with ckpt_path={last}"
    assert not (tmp_path / "run" / "metrics.json").exists()
    run(compose_config(tmp_path / "run", [*SMALL, "trainer.max_epochs=2", f"ckpt_path={last}"], cache_dir=cache))
    assert_bit_identical(last, ref_dir / "checkpoints" / "last.ckpt")


def test_ctrl_c_saves_a_checkpoint_and_exits_with_130_then_resume_is_bit_identical(reference, tmp_path):
    """Ctrl-C (SIGINT) during training does what SIGTERM does: the running batch finishes, last.ckpt
    is written, one line says what to resume from; no traceback and no Lightning message."""
    ref_dir, ref_steps, cache = reference
    result = run_py(*SMALL, "trainer.max_epochs=2", *interrupt(13, "SIGINT"), f"hydra.run.dir={tmp_path}/run",
                    f"paths.cache_dir={cache}")
    assert result.returncode == 130, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
    assert "weights_only" not in result.stderr  # Lightning's note on every save: last.ckpt says what it is
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert result.stderr.strip().splitlines()[-1] == \
        f"stopped by Ctrl-C at step 14; {last} holds step 14: resume with ckpt_path={last}"
    assert not (tmp_path / "run" / "metrics.json").exists()
    run(compose_config(tmp_path / "run", [*SMALL, "trainer.max_epochs=2", f"ckpt_path={last}"], cache_dir=cache))
    assert_bit_identical(last, ref_dir / "checkpoints" / "last.ckpt")


def test_ctrl_c_under_ddp_says_at_once_when_it_stops_then_every_rank_stops_with_a_checkpoint(reference, tmp_path):
    """Ctrl-C in a terminal reaches every rank (trainer=ddp_cpu): rank 0 says at once (before the
    running batch ends) when training will stop; the ranks agree at the next logging step (deciding
    together waits for the devices: not every step), write last.ckpt and stop together (no hang, no
    rank left behind)."""
    _, _, cache = reference
    result = run_py(*SMALL, "trainer=ddp_cpu", "trainer.max_epochs=2", "trainer.log_every_n_steps=4",
                    *interrupt(5, "SIGINT"), *mark_at(6),
                    f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={cache}", timeout=300)
    assert result.returncode == 130, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
    notice = ("Ctrl-C: stopping at the next logging step 8 or the epoch's end, if sooner, with a checkpoint "
              "(Ctrl-C again to stop now, losing the steps since the last checkpoint)")
    lines = result.stderr.splitlines()
    assert lines.count(notice) == 1, result.stderr[-3000:]
    assert lines.index(notice) < lines.index("mark: step 6")  # at once, not at step 8
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert result.stderr.strip().splitlines()[-1] == \
        f"stopped by Ctrl-C at step 8; {last} holds step 8: resume with ckpt_path={last}"


def test_a_nan_loss_stops_training_and_keeps_the_earlier_checkpoints(reference, tmp_path):
    _, _, cache = reference
    result = run_py(*SMALL, "trainer.max_epochs=2", "optim.optimizer.lr=1e8",
                    "callbacks.last_checkpoint.every_n_steps=2", f"hydra.run.dir={tmp_path}/run",
                    f"paths.cache_dir={cache}")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("error: train: ") and " at step " in last_line and "(lr " in last_line, last_line
    assert "module.max_nonfinite_steps=3" in last_line or "weights became NaN or inf" in last_line
    assert not (tmp_path / "run" / "metrics.json").exists()
    saved = sorted((tmp_path / "run" / "checkpoints").glob("*.ckpt"))
    assert saved, "the checkpoints written before the divergence are kept"
    for checkpoint in saved:
        assert all(torch.isfinite(t).all() for t in weights(checkpoint).values() if t.is_floating_point())


@pytest.mark.parametrize("fused", [True, False])
def test_max_nonfinite_steps_skips_bad_steps_then_stops(tmp_path, fused):
    """Two NaN steps in a row are skipped (Adam changes no weight; the step counter and schedule
    still advance, as Lightning counts them); the third stops training. A fused Adam (the presets')
    is told on the device (found_inf), any other optimizer has its gradients dropped."""
    first_nan, limit = 2, 3  # module.max_nonfinite_steps: 3 by default
    nan_loss = [f"+callbacks.nan._target_={__name__}.NanLossFrom", f"+callbacks.nan.step={first_nan}"]
    with pytest.raises(TrainingDiverged, match=rf"train: loss nan at step {first_nan + limit - 1} \(lr .*\), "
                                               rf"{limit} steps in a row"):
        run(compose_config(tmp_path, [*SMALL, "trainer.max_epochs=1", "trainer.limit_val_batches=0", *nan_loss,
                                      f"optim.optimizer.fused={fused}"]))


def test_last_checkpoint_holds_the_final_state_when_max_steps_stops_mid_epoch(tmp_path):
    """last.ckpt is the latest state also at the end of training, not the last monitored improvement."""
    metrics = run(compose_config(tmp_path, [*SMALL, "trainer.max_steps=7", "trainer.limit_val_batches=0",
                                            "callbacks.last_checkpoint.every_n_steps=null"]))
    assert metrics["steps"] == 7
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 7


def test_under_ddp_each_rank_gets_a_new_share_every_epoch_and_resume_is_bit_identical(ddp_run, tmp_path):
    """Two processes (trainer=ddp_cpu): per epoch the ranks' batches are disjoint and cover the data,
    each epoch in another order; a resume from the end-of-epoch last.ckpt gives the same weights (the
    run's last.ckpt of the end of epoch 0, kept as epoch 1 started: conftest's `ddp_run`)."""
    ranks = [steps(ddp_run / f"steps.jsonl.{rank}") for rank in range(2)]
    for epoch in range(2):
        shares = [[ids for e, _, ids in rank if e == epoch] for rank in ranks]
        assert len(shares[0]) == len(shares[1]) > 4
        seen = [i for share in shares for ids in share for i in ids]
        assert set(seen) == set(range(NUM_TRAIN))
        assert len(seen) - NUM_TRAIN <= max(map(len, shares[0] + shares[1]))
    assert [ids for e, _, ids in ranks[0] if e == 0] != [ids for e, _, ids in ranks[0] if e == 1]
    tested = (ddp_run / "run" / "test.translations.txt").read_text().splitlines()
    assert len(tested) == 20  # the test split under DDP: each sentence once
    epoch_end = ddp_run / "epoch0_last.ckpt"
    first_of_epoch_1 = next(step for epoch, step, _ in ranks[0] if epoch == 1)
    assert torch.load(epoch_end, weights_only=True)["global_step"] == first_of_epoch_1 > 0
    result = run_py(*DDP_RUN, f"paths.cache_dir={ddp_run}/cache", f"ckpt_path={epoch_end}",
                    *record(tmp_path / "rest.jsonl"), f"hydra.run.dir={tmp_path}/rest", timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in range(2):
        assert steps(Path(f"{tmp_path}/rest.jsonl.{rank}")) == [s for s in ranks[rank] if s[0] == 1]
    assert_bit_identical(tmp_path / "rest" / "checkpoints" / "last.ckpt", ddp_run / "run" / "checkpoints" / "last.ckpt")
    assert (ddp_run / "cache").is_dir()


def test_the_same_command_with_ckpt_path_last_resumes_a_killed_run_then_leaves_the_finished_one(reference, tmp_path):
    """`python run.py ... ckpt_path=last` three times in one folder: a fresh run, killed; the same
    command resumes it from its last.ckpt to the reference's weights, bit for bit; once more, the run
    is done: nothing is trained or written, and the task returns its metrics.json."""
    ref_dir, ref_steps, cache = reference
    command = [*SMALL, "trainer.max_epochs=2", "ckpt_path=last"]
    result = run_py(*command, *interrupt(10), f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={cache}")
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 10 - 10 % EVERY
    folder = [f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={cache}"]
    result = run_py(*command, *record(tmp_path / "rest.jsonl"), *folder)
    assert result.returncode == 0, result.stderr[-3000:]
    assert steps(tmp_path / "rest.jsonl") == ref_steps[10 - 10 % EVERY:]  # resumed, not started again
    assert_bit_identical(last, ref_dir / "checkpoints" / "last.ckpt")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    written = {p: p.stat().st_mtime_ns for p in (tmp_path / "run").rglob("*") if p.is_file() and p.suffix != ".yaml"
               and p.name not in ("run.log", "run.lock")}
    result = run_py(*command, *record(tmp_path / "again.jsonl"), *folder)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ckpt_path=last: " in (tmp_path / "run" / "run.log").read_text().split("says this run is done")[-2]
    assert not (tmp_path / "again.jsonl").exists()  # no batch trained
    assert {p: p.stat().st_mtime_ns for p in written} == written  # no checkpoint or metric rewritten
    again = run(compose_config(tmp_path / "run", command, cache_dir=cache))  # what a sweep's job returns
    assert again == metrics
