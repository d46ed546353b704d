"""experiments/multi30k's study scripts (screen.sh, full.sh, both_directions/run.sh, distill/run.sh,
gpu.sh) are lists of plain `python run.py` commands: with a stand-in `python3` on PATH that records
each call, every job gets its overrides, its folder and its threads, and the jobs that run again
(a finished run left as it is, a stopped one resumed) say so by `ckpt_path=last` or by being
pipelines (both tested where run.py does them: test_trustworthy_runs.py, test_distill.py)."""

import os
import subprocess
from pathlib import Path

from tests.helpers import ROOT

FAKE_PYTHON = """#!/usr/bin/env bash
# python3 run.py ARGS: record the call (and its threads); fail where an argument is $FAIL_ON
echo "${OMP_NUM_THREADS:--} $*" >> "$CALLS"
for a in "$@"; do
  [ -n "${FAIL_ON:-}" ] && [ "$a" = "$FAIL_ON" ] && { echo "error: $a: no such checkpoint" >&2; exit 1; }
done
exit 0
"""


def run_script(tmp_path: Path, script: str, *args: str, status: int = 0, **env: str) -> list[list[str]]:
    """Run experiments/multi30k/SCRIPT with the stand-in `python3` first on PATH (and `env`); the calls
    it made, each as its words (threads first), in the order made."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(FAKE_PYTHON)
    (bin_dir / "python3").chmod(0o755)
    calls.unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls), **env}
    env.pop("OMP_NUM_THREADS", None)
    result = subprocess.run(["bash", f"experiments/multi30k/{script}", *args], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == status, result.stderr
    return [line.split() for line in calls.read_text().splitlines()] if calls.exists() else []


def test_full_is_one_multirun_over_the_seeds_that_goes_on_where_it_stopped(tmp_path):
    calls = run_script(tmp_path, "full.sh", f"{tmp_path}/full", "1235,1236,1237", "model.dropout=0.3")
    assert calls == [["-", "run.py", "-m", "experiment=multi30k_recipe", "seed=1235,1236,1237", "model.dropout=0.3",
                      "ckpt_path=last", "progress=false", f"hydra.sweep.dir={tmp_path}/full"]]


def test_full_without_seeds_says_how_to_call_it():
    result = subprocess.run(["bash", "experiments/multi30k/full.sh", "outputs/x"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.strip().endswith("usage: full.sh SWEEP SEEDS [OVERRIDE ...]")


def test_the_screen_runs_its_eight_arms_in_two_lanes_of_one_thread(tmp_path):
    sweep = tmp_path / "screen"
    calls = {call[-1]: call[:-1] for call in run_script(tmp_path, "screen.sh", str(sweep))}
    assert sorted(calls) == [f"hydra.run.dir={sweep}/{n}" for n in range(8)]
    common = ["1", "run.py", "experiment=multi30k_recipe", "trainer.max_steps=1160", "ckpt_path=last",
              "progress=false"]
    assert calls[f"hydra.run.dir={sweep}/0"] == [*common, "data.tokenizer.dropout=0.0", "callbacks=default",
                                                 "seed=1234"]
    assert calls[f"hydra.run.dir={sweep}/7"] == [*common, "data.tokenizer.dropout=0.1", "callbacks=ema",
                                                 "callbacks.ema.decay=0.99", "seed=1235"]


def test_both_directions_trains_its_three_runs_at_a_fraction_of_the_budget_and_skips_en_de_at_the_full_one(tmp_path):
    runs = tmp_path / "bd"
    calls = run_script(tmp_path, "both_directions/run.sh", str(runs), STEPS="2937")
    tail = ["trainer.max_steps=2937", "trainer.limit_val_batches=1", "ckpt_path=last", "progress=false"]
    lanes = sorted(calls[:2], key=lambda call: call[-1])
    assert lanes == [["1", "run.py", "experiment=multi30k/both_directions", *tail, f"hydra.run.dir={runs}/both"],
                     ["1", "run.py", "experiment=multi30k_recipe", *tail, f"hydra.run.dir={runs}/en_de"]]
    assert calls[2] == ["2", "run.py", "experiment=multi30k/de_en", *tail, f"hydra.run.dir={runs}/de_en"]  # alone
    full = run_script(tmp_path, "both_directions/run.sh", str(tmp_path / "full"))
    assert sorted(call[-1] for call in full) == [f"hydra.run.dir={tmp_path}/full/{n}" for n in ("both", "de_en")]


def test_the_students_translate_once_on_both_cores_then_train_side_by_side_on_the_same_translations(tmp_path):
    runs = tmp_path / "runs"
    calls = run_script(tmp_path, "distill/run.sh", str(runs), "task.baseline=b", MEMBERS="m")
    student = ["run.py", "experiment=multi30k/distilled", "task.baseline=b", "progress=false"]
    assert calls[0] == ["2", *student, "task.until=synthetic", f"hydra.run.dir={runs}/distilled"]
    assert sorted(calls[1:]) == [
        ["1", *student, f"hydra.run.dir={runs}/distilled"],
        ["1", *student, "task.originals_weight=1.0", f"task.translations={runs}/distilled",
         f"hydra.run.dir={runs}/distilled_orig"]]


def test_a_first_student_that_fails_before_its_translations_are_done_stops_the_script(tmp_path):
    runs = tmp_path / "runs"
    calls = run_script(tmp_path, "distill/run.sh", str(runs), status=1, MEMBERS="m", FAIL_ON="task.until=synthetic")
    assert len(calls) == 1  # the students never started


FAKE_GPU_PYTHON = """#!/usr/bin/env bash
# the setup step and the import check pass; python run.py ARGS: record the call, then leave what a
# finished run leaves in its folder (a pipeline: its student's metrics)
[ "$1" = run.py ] || exit 0
for a in "$@"; do case $a in hydra.run.dir=*) dir=${a#hydra.run.dir=} ;; esac; done
echo "$*" >> "$CALLS"
mkdir -p "$dir/checkpoints/epochs" && echo log > "$dir/run.log"
if [[ " $* " == *" experiment=multi30k/distilled "* ]]; then
  [[ " $* " == *" task.until=synthetic "* ]] || { mkdir -p "$dir/student" && echo '{}' > "$dir/student/metrics.json"; }
else
  touch "$dir/checkpoints/average.ckpt" "$dir/checkpoints/epochs/epoch=1.ckpt" && echo '{}' > "$dir/metrics.json"
fi
"""


def test_the_gpu_script_trains_the_teacher_then_both_students_on_its_one_translation_and_packs_each_run(tmp_path):
    bin_dir, calls, runs, out = tmp_path / "bin", tmp_path / "calls.txt", tmp_path / "runs", tmp_path / "out"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(FAKE_GPU_PYTHON)
    (bin_dir / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls)}
    for command in (["start", str(runs), "distillation"], ["wait", str(runs), "20", str(out)]):
        result = subprocess.run(["bash", "experiments/multi30k/gpu.sh", *command], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
    lines = [line.split() for line in calls.read_text().splitlines()]
    gpu = ["trainer=gpu", "trainer.precision=32-true", "module.compile=false", "data.num_workers=2", "logger=csv",
           "callbacks.dashboard.every_n_validations=1000"]
    for line, seed in zip(sorted(lines[:2]), ("1235", "1236")):
        assert line == ["run.py", "experiment=multi30k_recipe", f"seed={seed}", "trainer.limit_val_batches=1",
                        "ckpt_path=last", *gpu, "progress=false", f"hydra.run.dir={runs}/seed{seed}"]
    assert lines[2] == ["run.py", "experiment=multi30k/distilled", "task.until=synthetic", *gpu, "progress=false",
                        f"hydra.run.dir={runs}/distilled"]  # the teacher's translations, once
    assert sorted(lines[3:]) == [  # then both students, side by side; distilled_orig takes distilled's translations
        ["run.py", "experiment=multi30k/distilled", "seed=1234", "task.originals_weight=1.0",
         f"task.translations={runs}/distilled", "trainer.limit_val_batches=1.0", *gpu, "progress=false",
         f"hydra.run.dir={runs}/distilled_orig"],
        ["run.py", "experiment=multi30k/distilled", "seed=1234", "trainer.limit_val_batches=1.0", *gpu,
         "progress=false", f"hydra.run.dir={runs}/distilled"]]
    assert sorted(p.name for p in out.iterdir()) == [f"{n}.tgz" for n in ("distilled", "distilled_orig", "seed1235",
                                                                          "seed1236")]
    packed = subprocess.run(["tar", "tzf", str(out / "seed1235.tgz")], capture_output=True, text=True).stdout.split()
    assert "seed1235/checkpoints/average.ckpt" in packed and "seed1235/run.log" in packed
    assert not any("epochs" in p for p in packed) and "seed1235: done" in result.stderr
