"""The arguments a DDP rank of a multirun job runs with, and a failed job's record."""

import json

from transformer_mt.multirun import JOB_ENV, child_argv, record_failure

SWEEP_ARGV = ["run.py", "-m", "model.heads=1,2", "trainer=ddp_cpu", 'hydra.run.dir="outputs/x"',
              "hydra.job.name=train_ddp_process_1", "hydra.output_subdir=null"]


def test_a_rank_of_a_multirun_job_runs_that_job_and_not_the_sweep():
    job = json.dumps({"overrides": ["model.heads=2", "trainer=ddp_cpu"], "dir": "/runs/sweep/1"})
    assert child_argv(SWEEP_ARGV, {JOB_ENV: job, "LOCAL_RANK": "1"}) == [
        "run.py", "model.heads=2", "trainer=ddp_cpu", "hydra.run.dir=/runs/sweep/1", "hydra.output_subdir=null",
        "hydra.job.name=train_ddp_process_1"]


def test_rank_zero_and_single_runs_keep_their_arguments():
    job = json.dumps({"overrides": ["model.heads=2"], "dir": "/runs/sweep/1"})
    assert child_argv(SWEEP_ARGV, {JOB_ENV: job, "LOCAL_RANK": "0"}) == SWEEP_ARGV
    assert child_argv(SWEEP_ARGV, {"LOCAL_RANK": "1"}) == SWEEP_ARGV  # Lightning's own command, not a multirun


def test_a_failed_job_leaves_one_line(tmp_path):
    line = record_failure(str(tmp_path), ValueError("model.heads=0: must be an integer >= 1\nmore"))
    assert line == "ValueError: model.heads=0: must be an integer >= 1"
    assert (tmp_path / "error.txt").read_text() == line + "\n"
