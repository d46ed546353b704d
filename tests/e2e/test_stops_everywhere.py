"""Every stop is one line and its exit status, wherever it lands (stops.py): Ctrl-C and SIGTERM
sent by a real training run to itself as it is built, between fitting and testing, and while it
tests; a stop there leaves no run.lock, and the command it names goes on to the run's end. (Stops
during fitting: test_trustworthy_runs.py, test_stop_signals.py; in a pipeline: test_distill.py;
the server: test_serve.py.)"""

import json
import os
import shlex
import signal
import subprocess
import sys

import pytest

from tests.helpers import ROOT, run_py, signal_at
from transformer_mt.checkpoints.loading import read_checkpoint

# stop lines, exit statuses and files: not run again under the portable profile
pytestmark = [pytest.mark.slow, pytest.mark.cli]
RUN = ["trainer.max_epochs=1", "data.corpora.toy.num_train=100", "data.corpora.toy.num_val=5",
       "data.corpora.toy.num_test=5", "~callbacks.epoch_checkpoint"]
SHIPPED = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"
BY = {"SIGINT": ("Ctrl-C", 130), "SIGTERM": ("SIGTERM", 143)}


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> str:
    return f"paths.cache_dir={tmp_path_factory.mktemp('cache')}"


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_stop_as_the_run_is_built_says_training_had_not_started(cache, tmp_path, signal_name):
    result = run_py(*RUN, *signal_at("built", signal_name), cache, f"hydra.run.dir={tmp_path}/run")
    by, status = BY[signal_name]
    assert result.returncode == status, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == f"stopped by {by} before training started"
    assert "Traceback" not in result.stderr and not (tmp_path / "run" / "run.lock").exists()


@pytest.mark.parametrize("point, signal_name", [("fit_end", "SIGTERM"), ("test_start", "SIGINT"),
                                                ("test_end", "SIGTERM")])
def test_a_stop_after_fitting_names_the_steps_trained_and_the_resume_that_tests(cache, tmp_path, point,
                                                                                signal_name):
    """Between fitting and testing, or while testing: the steps trained, the checkpoint holding them,
    the resume; run.lock is gone; the resume trains no further step and writes the test's metrics.
    The run stays as it was: no metrics.json."""
    run = tmp_path / "run"
    result = run_py(*RUN, *signal_at(point, signal_name), cache, f"hydra.run.dir={run}")
    by, status = BY[signal_name]
    assert result.returncode == status, result.stderr[-3000:]
    last = run / "checkpoints" / "last.ckpt"
    steps = read_checkpoint(last)["global_step"]
    assert steps > 0
    assert result.stderr.strip().splitlines()[-1] == (
        f"stopped by {by} after training to step {steps}, before the test was done; {last} holds step {steps}: "
        f"resume with ckpt_path={last}")
    assert "Traceback" not in result.stderr and not (run / "run.lock").exists()
    assert not (run / "metrics.json").exists()
    if point != "fit_end":  # one resume is enough: the three stops leave the same state
        return
    resumed = run_py(*RUN, cache, f"ckpt_path={last}", f"hydra.run.dir={run}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["steps"] == steps and metrics["test/bleu"] >= 0


def test_a_server_started_in_the_background_of_a_script_stops_on_kill_int_with_its_line(tmp_path):
    """A non-interactive shell starts `cmd &` with SIGINT ignored; run.py handles it all the same
    (stops.py): `kill -INT` stops the server as Ctrl-C does, with its line and 130, never 0."""
    serve = shlex.join([sys.executable, str(ROOT / "run.py"), "task=serve", f"ckpt_path={SHIPPED}", "task.port=0",
                        f"hydra.run.dir={tmp_path}/run"])
    err = tmp_path / "stderr"
    script = (f"{serve} 2>{err} & p=$!; until grep -q 'serving default on' {err} || ! kill -0 $p 2>/dev/null; "
              "do sleep 0.1; done; kill -INT $p; wait $p; echo $?")
    result = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    lines = err.read_text().strip().splitlines()
    assert result.stdout.strip() == "130", err.read_text()[-3000:]
    assert lines[-1] == "stopped by Ctrl-C: translation requests answered: 0, the last in flight included"
    assert "served 0 lines in 0 batches" in lines[-2] and "Traceback" not in err.read_text()


def test_sigterm_to_a_translate_says_the_lines_done_and_leaves_no_file(tmp_path):
    """SIGTERM sent when the log says decoding starts: the lines translated of the input's, the
    output not written (and no temporary file, no lock left), 143."""
    from tests.helpers import python

    source = tmp_path / "in.txt"
    source.write_text("A man is riding a bicycle down the street.\n" * 20000)
    output = tmp_path / "out.txt"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    command = [python(env), str(ROOT / "run.py"), "task=translate", f"ckpt_path={SHIPPED}", f"task.input={source}",
               f"task.output={output}", f"hydra.run.dir={tmp_path}/run"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        if "decodes on cpu" in line:
            process.send_signal(signal.SIGTERM)
            break
    err = process.communicate(timeout=120)[1]
    assert process.returncode == 143, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("stopped by SIGTERM after ") and last.endswith(
        f" of 20000 lines translated; task.output={output} not written (it appears only whole): run it again")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "run"]  # no output, no .tmp, no .lock
