"""The tests' warm `python run.py` (tests/warm_start.py) gives what a plain process gives."""

import os

from tests.helpers import run_py, warm_server


def test_a_warm_run_exits_and_prints_as_a_plain_process(tmp_path):
    args = ["data=files", f"data.corpus.data_dir={tmp_path}/missing", f"hydra.run.dir={tmp_path}/run"]
    plain = run_py(*args, cores=os.sched_getaffinity(0))  # with `cores`: never forked from the warm server
    warm = run_py(*args, input="ignored\n")
    assert warm_server({**os.environ, "PYTHONWARNINGS": "ignore"}) is not None  # it ran there
    assert warm_server({**os.environ, "PYTHONWARNINGS": "ignore", "HF_HUB_OFFLINE": "1"}) is None
    assert (warm.returncode, warm.stdout) == (plain.returncode, plain.stdout) == (1, "")
    assert warm.stderr.splitlines()[-1] == plain.stderr.splitlines()[-1] == (
        f"error: {tmp_path}/missing/train.en: no such file")
    assert "Traceback" not in warm.stderr + plain.stderr
