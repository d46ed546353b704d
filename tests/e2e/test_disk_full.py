"""The disk fills up during training: `python run.py` stops with one line naming the checkpoint it
could not write and "No space left on device" (exit status 1, no traceback), leaves no temporary
file, and the last.ckpt written before is whole."""

import os

import pytest
import torch

from tests.helpers import assert_clean_failure, run_py
from transformer_mt.atomic import atomic_file
from transformer_mt.training.atomic_io import AtomicCheckpointIO

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile

TOY = ["data.corpora.toy.num_train=600", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20"]


class DiskFullFrom(AtomicCheckpointIO):
    """The run's checkpoint writer, until the disk is full at step `step`: from then on the file a
    checkpoint is written to is /dev/full, whose writes fail with ENOSPC as a full disk's do."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        if checkpoint["global_step"] < self.step:
            return super().save_checkpoint(checkpoint, path, storage_options)
        with atomic_file(path) as tmp:
            os.unlink(tmp)
            os.symlink("/dev/full", tmp)
            with open(tmp, "wb") as f:
                torch.save(checkpoint, f)


def test_a_full_disk_while_training_is_one_line_and_the_earlier_checkpoint_stays_whole(tmp_path):
    result = run_py(*TOY, "trainer.max_epochs=2", "callbacks.last_checkpoint.every_n_steps=4",
                    f"trainer.plugins=[{{_target_:{__name__}.DiskFullFrom,step:6}}]", f"hydra.run.dir={tmp_path}/run",
                    f"paths.cache_dir={tmp_path}/cache")
    assert_clean_failure(result, "No space left on device")
    failed = result.stderr.strip().splitlines()[-1].removeprefix("error: ").removesuffix(": No space left on device")
    assert failed.startswith(f"{tmp_path}/run/checkpoints/") and failed.endswith(".ckpt"), failed
    checkpoints = tmp_path / "run" / "checkpoints"
    assert not [p for p in checkpoints.rglob("*") if p.name.startswith(".")]  # no temporary file left
    assert torch.load(checkpoints / "last.ckpt", map_location="cpu", weights_only=True)["global_step"] == 4
    assert not (tmp_path / "run" / "metrics.json").exists()
