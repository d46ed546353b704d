"""Stopping a DDP run (trainer=ddp_cpu) with real signals, each rank signalling itself at the same
step as a terminal's Ctrl-C or a scheduler's SIGTERM reaches every rank: rank 0 says at once when
training will stop, SIGTERM stops with a checkpoint (Lightning's own handler broke the ranks'
collectives), and a second Ctrl-C stops at once. A CPU run with more processes than cores says so."""

import os

import pytest

from tests.helpers import interrupt_at, mark_at, run_py
from transformer_mt.checkpoints.loading import read_checkpoint

pytestmark = pytest.mark.slow
SMALL = ["data.corpora.toy.num_train=600", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20",
         "data.max_tokens=512", "~callbacks.epoch_checkpoint", "callbacks.last_checkpoint.every_n_steps=4",
         "trainer=ddp_cpu", "trainer.max_epochs=2"]  # 10 batches per epoch and process


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> str:
    return f"paths.cache_dir={tmp_path_factory.mktemp('cache')}"


def test_sigterm_under_ddp_says_so_at_once_and_stops_every_rank_with_a_checkpoint(cache, tmp_path):
    result = run_py(*SMALL, "trainer.log_every_n_steps=4", *interrupt_at(5, "SIGTERM"), *mark_at(6), cache,
                    f"hydra.run.dir={tmp_path}/run", timeout=300)
    assert result.returncode == 143, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "Connection reset" not in result.stderr
    notice = "SIGTERM: stopping at the next logging step 8 or the epoch's end, if sooner, with a checkpoint"
    lines = result.stderr.splitlines()
    assert lines.count(notice) == 1 and lines.index(notice) < lines.index("mark: step 6"), result.stderr[-3000:]
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert lines[-1] == f"stopped by SIGTERM at step 8; {last} holds step 8: resume with ckpt_path={last}"
    assert read_checkpoint(last)["global_step"] == 8


def test_a_second_ctrl_c_under_ddp_stops_at_once_and_too_many_processes_are_warned(cache, tmp_path):
    """The first Ctrl-C (step 5) would stop at the epoch's end (logging every 50 steps); the second
    (step 6) stops every rank at once, losing the steps since last.ckpt (step 4), which stays whole.
    Both processes run on one core: one warning line says so."""
    result = run_py(*SMALL, "trainer.log_every_n_steps=50", *interrupt_at(5, "SIGINT"),
                    "+callbacks.again._target_=tests.helpers.Interrupt", "+callbacks.again.step=6",
                    "+callbacks.again.signal_name=SIGINT", cache, f"hydra.run.dir={tmp_path}/run",
                    cores={min(os.sched_getaffinity(0))}, timeout=300)
    assert result.returncode == 130, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
    lines = result.stderr.splitlines()
    warned = [line for line in lines if "starts 2 training processes on 1 CPU cores" in line]
    assert len(warned) == 1 and "use trainer.devices=1 or fewer" in warned[0], result.stderr[-3000:]
    assert lines.count("Ctrl-C: stopping at the next logging step 50 or the epoch's end, if sooner, with a "
                       "checkpoint (Ctrl-C again to stop now, losing the steps since the last checkpoint)") == 1
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert lines[-1] == f"stopped by Ctrl-C at once at step 6; {last} holds step 4: resume with ckpt_path={last}"
    assert read_checkpoint(last)["global_step"] == 4
