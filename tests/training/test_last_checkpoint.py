"""Checkpoint writes: atomic (a failure half-way leaves the previous file whole), staged beside the
destination and not in $TMPDIR (which may be another filesystem)."""

import os
import tempfile

import pytest
import torch

from tests.helpers import schema_refusal
from transformer_mt.training.atomic_io import AtomicCheckpointIO
from transformer_mt.training.last_checkpoint import LastCheckpoint


class BreaksWhilePickled:
    def __reduce__(self):
        raise RuntimeError("killed while writing")


def test_a_save_that_fails_half_way_leaves_the_previous_checkpoint_loadable(tmp_path):
    io = AtomicCheckpointIO()
    path = tmp_path / "last.ckpt"
    io.save_checkpoint({"step": 1, "w": torch.arange(100_000.0)}, path)
    with pytest.raises(RuntimeError, match="killed while writing"):
        io.save_checkpoint({"step": 2, "w": torch.arange(100_000.0), "later": BreaksWhilePickled()}, path)
    assert torch.load(path, weights_only=True)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def test_the_temporary_file_is_beside_the_checkpoint_not_in_tmpdir(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("TMPDIR", str(elsewhere))
    monkeypatch.setattr(tempfile, "tempdir", None)
    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (renamed.append((src, dst)), real_replace(src, dst))[1])
    AtomicCheckpointIO().save_checkpoint({"step": 3}, tmp_path / "ckpt" / "last.ckpt")
    (src, dst), = renamed
    assert os.path.dirname(src) == os.path.dirname(dst) == str(tmp_path / "ckpt")
    assert not list(elsewhere.iterdir())


@pytest.mark.parametrize("key, value, what", [("every_n_steps", 0, "an integer >= 1 or null"),
                                              ("every_n_minutes", -1, "a number > 0 or null")])
def test_last_checkpoint_triggers_are_checked(tmp_path, key, value, what):
    assert schema_refusal(tmp_path, f"callbacks.last_checkpoint.{key}", value) == \
        f"callbacks.last_checkpoint.{key}={value}: must be {what}"


class FakeTrainer:
    """What LastCheckpoint reads of a Trainer, and a record of its saves."""

    def __init__(self) -> None:
        self.global_step, self.received_sigterm, self.world_size, self.fast_dev_run = 0, False, 1, False
        self.is_global_zero, self.saved = True, []

    def save_checkpoint(self, path, weights_only: bool | None = None) -> None:
        assert weights_only is False  # last.ckpt is a full training state
        self.saved.append(self.global_step)


def test_last_checkpoint_is_written_every_n_steps_every_m_minutes_and_on_sigterm(tmp_path, monkeypatch):
    clock = {"now": 0.0}
    monkeypatch.setattr("transformer_mt.training.last_checkpoint.time.monotonic", lambda: clock["now"])
    callback, trainer = LastCheckpoint(str(tmp_path), every_n_steps=5, every_n_minutes=10), FakeTrainer()
    callback.on_train_start(trainer, None)

    def step(seconds: float) -> None:
        clock["now"] += seconds
        trainer.global_step += 1
        callback.on_train_batch_end(trainer, None, None, None, 0)

    for _ in range(7):
        step(1.0)  # steps 1-7, a second each: saved at step 5 only
    assert trainer.saved == [5]
    step(599.0)  # step 8: 10 minutes after the save of step 5
    assert trainer.saved == [5, 8]
    step(1.0)
    trainer.received_sigterm = True
    step(1.0)  # step 10 is due anyway; step 11 is saved because of the signal
    step(1.0)
    assert trainer.saved == [5, 8, 10, 11]
    callback.on_train_epoch_end(trainer, None)
    assert trainer.saved[-1] == 11 and len(trainer.saved) == 5
