"""The tests' warm `python run.py` (tests/warm_start.py) gives what a plain process gives, and the
`python` that forks it for a test's own processes (experiments/gpu/warm_client.py) stands for the
run it forked: signals reach the run, and the run ends when it is killed."""

import os
import signal
import subprocess
import sys
import time

from tests.helpers import ROOT, mark_at, python, run_py, warm_server

TOY = ["data.corpora.toy.num_train=600", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20",
       "trainer.max_epochs=50"]


def test_a_warm_run_exits_and_prints_as_a_plain_process(tmp_path):
    args = ["data=files", f"data.corpora.files.data_dir={tmp_path}/missing", f"hydra.run.dir={tmp_path}/run"]
    plain = run_py(*args, warm=False)
    warm = run_py(*args, input="ignored\n")
    assert warm_server({**os.environ, "PYTHONWARNINGS": "ignore"}) is not None  # it ran there
    assert warm_server({**os.environ, "PYTHONWARNINGS": "ignore", "HF_HOME": "/elsewhere"}) is None
    assert (warm.returncode, warm.stdout) == (plain.returncode, plain.stdout) == (1, "")
    assert warm.stderr.splitlines()[-1] == plain.stderr.splitlines()[-1] == (
        f"error: {tmp_path}/missing: no such folder (a corpus's data_dir; data=multi30k's is under paths.data_dir, "
        "which is $DATA_DIR, else data/ in the project)")
    assert "Traceback" not in warm.stderr + plain.stderr


def start_training(folder) -> tuple[subprocess.Popen, int]:
    """A long training run started with the warm `python`, once it has done step 2: the process, and
    the pid of the run (its run.lock's)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    assert python(env) != sys.executable  # the warm server is up
    process = subprocess.Popen([python(env), str(ROOT / "run.py"), *TOY, *mark_at(2), f"hydra.run.dir={folder}",
                                f"paths.cache_dir={folder}/cache"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        if line.strip() == "mark: step 2":
            return process, int((folder / "run.lock").read_text().split()[1])
    raise AssertionError(f"the run ended first: {process.wait()}")


def test_the_warm_python_passes_a_sigterm_on_and_a_sigkill_of_it_ends_the_run(tmp_path):
    process, run = start_training(tmp_path / "sigterm")
    assert run != process.pid  # forked by the warm server
    process.send_signal(signal.SIGTERM)
    rest = process.stderr.read()
    assert process.wait(timeout=120) == 143  # the run's own exit status for SIGTERM
    assert rest.strip().splitlines()[-1].startswith("stopped by SIGTERM at step "), rest[-3000:]

    process, run = start_training(tmp_path / "sigkill")
    process.kill()
    assert process.wait(timeout=10) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{run}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{run}")  # no run left behind without its process
