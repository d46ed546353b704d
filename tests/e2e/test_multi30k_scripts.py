"""experiments/multi30k/screen.sh and full.sh, the long runs of issue 38, with a stand-in for the
interpreter that records each `run.py` call: every job gets its overrides, a folder and one thread;
a finished job is skipped and a stopped one resumed from its last.ckpt when the script runs again."""

import os
import subprocess
from pathlib import Path

from tests.helpers import ROOT

FAKE_PYTHON = """#!/usr/bin/env bash
# run.py ARGS: record the call; leave a last.ckpt; finish (metrics.json) unless the seed is $STOP_SEED
shift
for a in "$@"; do
  case $a in hydra.run.dir=*) dir=${a#hydra.run.dir=} ;; seed=*) seed=${a#seed=} ;; esac
done
echo "$OMP_NUM_THREADS $*" >> "$CALLS"
mkdir -p "$dir/checkpoints" && touch "$dir/checkpoints/last.ckpt"
[ "$seed" = "${STOP_SEED:-}" ] && exit 1
echo '{}' > "$dir/metrics.json"
"""


def run_script(tmp_path: Path, script: str, *args: str, stop_seed: str = "") -> list[list[str]]:
    """Run experiments/multi30k/SCRIPT with the stand-in; the calls it made, each as its words."""
    python, calls = tmp_path / "python", tmp_path / "calls.txt"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    calls.unlink(missing_ok=True)
    env = {**os.environ, "PYTHON": str(python), "CALLS": str(calls), "STOP_SEED": stop_seed}
    result = subprocess.run(["bash", f"experiments/multi30k/{script}", *args], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return sorted(line.split() for line in calls.read_text().splitlines()) if calls.exists() else []


def test_full_runs_every_seed_in_its_folder_then_resumes_only_the_stopped_one(tmp_path):
    sweep = tmp_path / "full"
    calls = run_script(tmp_path, "full.sh", str(sweep), "1235", "1236", "1237", "--", "model.dropout=0.3",
                       stop_seed="1236")
    assert calls == [["1", "experiment=multi30k_recipe", f"seed={seed}", "model.dropout=0.3", "progress=false",
                      f"hydra.run.dir={sweep}/{k}"] for k, seed in enumerate(["1235", "1236", "1237"])]
    assert (sweep / "1.log").is_file() and not (sweep / "1" / "metrics.json").exists()

    again = run_script(tmp_path, "full.sh", str(sweep), "1235", "1236", "1237", "--", "model.dropout=0.3")
    assert again == [["1", "experiment=multi30k_recipe", "seed=1236", "model.dropout=0.3", "progress=false",
                      f"hydra.run.dir={sweep}/1", f"ckpt_path={sweep}/1/checkpoints/last.ckpt"]]
    assert run_script(tmp_path, "full.sh", str(sweep), "1235", "1236", "1237") == []  # all done


def test_the_screen_runs_its_eight_arms_at_the_short_budget(tmp_path):
    sweep = tmp_path / "screen"
    calls = {call[-1]: call[:-1] for call in run_script(tmp_path, "screen.sh", str(sweep))}
    assert sorted(calls) == [f"hydra.run.dir={sweep}/{n}" for n in range(8)]
    common = ["1", "experiment=multi30k_recipe", "trainer.max_steps=1160"]
    assert calls[f"hydra.run.dir={sweep}/0"] == [*common, "data.tokenizer.dropout=0.0", "callbacks=default",
                                                 "seed=1234", "progress=false"]
    assert calls[f"hydra.run.dir={sweep}/7"] == [*common, "data.tokenizer.dropout=0.1", "callbacks=ema",
                                                 "callbacks.ema.decay=0.99", "seed=1235", "progress=false"]
    assert run_script(tmp_path, "screen.sh", str(sweep)) == []


def test_full_without_seeds_says_how_to_call_it():
    result = subprocess.run(["bash", "experiments/multi30k/full.sh", "outputs/x"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.strip() == "usage: full.sh SWEEP SEED [SEED ...] [-- OVERRIDE ...]"
