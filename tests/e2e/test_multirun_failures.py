"""A multirun whose jobs fail for a user's mistake: one line per failed job, every job run, and one
summary line at the end with exit status 1, as a single run fails; no traceback."""

import pytest

from tests.helpers import assert_clean_failure, run_py

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile

NEEDS_CKPT = "this task needs ckpt_path=PATH (a checkpoint written by task=train)"


def test_a_config_error_in_every_job_is_one_line_each_and_a_summary(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_py("-m", "model.heads=1,2", "task=evaluate", f"hydra.sweep.dir={sweep}",
                    f"paths.cache_dir={tmp_path}/cache")
    assert_clean_failure(result, f"error: 2 of 2 jobs failed (job 0, 1); each one's reason is in error.txt in its "
                                 f"run directory under {sweep}")
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors[:2] == [f"error: job 0 (model.heads=1 task=evaluate paths.cache_dir={tmp_path}/cache): {NEEDS_CKPT}",
                          f"error: job 1 (model.heads=2 task=evaluate paths.cache_dir={tmp_path}/cache): {NEEDS_CKPT}"]
    assert "Error executing job" not in result.stderr and "HYDRA_FULL_ERROR" not in result.stderr
    for job in ("0", "1"):
        assert (sweep / job / "error.txt").read_text() == f"ConfigError: {NEEDS_CKPT}\n"


def test_the_jobs_that_work_are_done_and_only_the_failed_ones_counted(small_checkpoint, tmp_path):
    sweep = tmp_path / "sweep"
    result = run_py("-m", "task=evaluate", f"ckpt_path={small_checkpoint},{tmp_path}/missing.ckpt",
                    f"hydra.sweep.dir={sweep}", f"paths.cache_dir={tmp_path}/cache")
    assert_clean_failure(result, "error: 1 of 2 jobs failed (job 1)")
    missing = f"{tmp_path}/missing.ckpt"
    assert f"error: job 1 (task=evaluate ckpt_path={missing} paths.cache_dir={tmp_path}/cache): ckpt_path={missing}: " \
           "no such file" in result.stderr.splitlines()
    assert (sweep / "0" / "metrics.json").is_file() and not (sweep / "0" / "error.txt").exists()
