"""experiments/multi30k/screen.sh, full.sh and both_directions/run.sh, the long runs of issues 38 and 49,
with a stand-in for the interpreter that records each `run.py` call: every job gets its overrides, a
folder and one thread (two for a job that runs alone); a finished job is skipped and a stopped one
resumed from its last.ckpt when the script runs again."""

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
echo "run.py for seed $seed"
mkdir -p "$dir/checkpoints" && touch "$dir/checkpoints/last.ckpt"
[ "$seed" = "${STOP_SEED:-}" ] && exit 1
echo '{}' > "$dir/metrics.json"
"""


def run_script(tmp_path: Path, script: str, *args: str, stop_seed: str = "", **env: str) -> list[list[str]]:
    """Run experiments/multi30k/SCRIPT with the stand-in (and `env`); the calls it made, each as its words."""
    python, calls = tmp_path / "python", tmp_path / "calls.txt"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    calls.unlink(missing_ok=True)
    env = {**os.environ, "PYTHON": str(python), "CALLS": str(calls), "STOP_SEED": stop_seed, **env}
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
    assert (sweep / "1.log").read_text() == "run.py for seed 1236\n" * 2  # the stopped run's output kept
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



def test_both_directions_trains_its_three_runs_at_a_fraction_of_the_budget_and_skips_en_de_at_the_full_one(tmp_path):
    runs = tmp_path / "bd"
    calls = {call[-1]: call[:-1] for call in run_script(tmp_path, "both_directions/run.sh", str(runs), stop_seed="-",
                                                           STEPS="2937")}
    assert sorted(calls) == [f"hydra.run.dir={runs}/{name}" for name in ("both", "de_en", "en_de")]
    tail = ["trainer.max_steps=2937", "trainer.limit_val_batches=1", "progress=false"]
    both = calls[f"hydra.run.dir={runs}/both"]
    assert both[:4] == ["1", "experiment=multi30k_recipe", "data.corpus.tag=2de", "+data.corpora.de_en={_target_:"]
    assert both[-5:] == ["2en}", "task.last_n=5", *tail]
    assert calls[f"hydra.run.dir={runs}/en_de"] == ["1", "experiment=multi30k_recipe", *tail]
    assert calls[f"hydra.run.dir={runs}/de_en"] == ["2", "experiment=multi30k_recipe", "data.corpus.src_lang=de",
                                                    "data.corpus.tgt_lang=en", *tail]
    full = {call[-1] for call in run_script(tmp_path, "both_directions/run.sh", str(tmp_path / "full"), stop_seed="-")}
    assert full == {f"hydra.run.dir={tmp_path}/full/{name}" for name in ("both", "de_en")}  # en_de: the shipped run


FAKE_GPU_PYTHON = """#!/usr/bin/env bash
# the setup step and the import check pass; run.py ARGS: record the call, then leave what a finished
# run leaves (a pipeline: its synthetic stage done, then its student's metrics)
[ "$1" = run.py ] || exit 0
shift
for a in "$@"; do case $a in hydra.run.dir=*) dir=${a#hydra.run.dir=} ;; esac; done
echo "$*" >> "$CALLS"
if [[ " $* " == *" task=distill "* ]]; then
  mkdir -p "$dir/synthetic" "$dir/student"
  [ -f "$dir/synthetic/train.de" ] || echo "translated by $dir" > "$dir/synthetic/train.de"
  touch "$dir/synthetic/train.en" && echo '{"done": true}' > "$dir/synthetic/stage.json"
  echo '{}' > "$dir/student/metrics.json"
else
  mkdir -p "$dir/checkpoints/epochs" && touch "$dir/checkpoints/average.ckpt" "$dir/checkpoints/epochs/epoch=1.ckpt"
  echo '{}' > "$dir/metrics.json"
fi
"""


def test_the_gpu_script_trains_the_teacher_then_both_students_on_its_one_translation_and_packs_each_run(tmp_path):
    python, calls, runs, out = tmp_path / "python", tmp_path / "calls.txt", tmp_path / "runs", tmp_path / "out"
    python.write_text(FAKE_GPU_PYTHON)
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "CALLS": str(calls)}
    for command in (["start", str(runs), "distillation"], ["wait", str(runs), "20", str(out)]):
        result = subprocess.run(["bash", "experiments/multi30k/gpu.sh", *command], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    gpu = ["trainer=gpu", "trainer.precision=32-true", "module.compile=false", "data.num_workers=2", "logger=csv",
           "callbacks.dashboard.every_n_validations=1000"]
    members = sorted(lines[:2])
    for line, seed in zip(members, ("1235", "1236")):
        assert line.split() == ["experiment=multi30k_recipe", f"seed={seed}", "trainer.limit_val_batches=1", *gpu,
                                "progress=false", f"hydra.run.dir={runs}/seed{seed}"]
    teacher = (f"task.teacher=[experiments/multi30k/multi30k_en_de.ckpt,{runs}/seed1235/checkpoints/average.ckpt,"
               f"{runs}/seed1236/checkpoints/average.ckpt]")
    assert [line.split() for line in lines[2:]] == [  # the students after the members; distilled_orig reads
        ["task=distill", "experiment=multi30k_recipe", teacher, f"seed={seed}", *extra,  # distilled's translations
         "trainer.limit_val_batches=1.0", *gpu, "progress=false", f"hydra.run.dir={runs}/{name}"]
        for name, seed, extra in (("distilled", "1234", []), ("distilled_orig", "1234", ["task.originals_weight=1.0"]))]
    assert (runs / "distilled_orig/synthetic/train.de").read_text() == f"translated by {runs}/distilled\n"
    assert sorted(p.name for p in out.iterdir()) == [f"{n}.tgz" for n in ("distilled", "distilled_orig", "seed1235",
                                                                          "seed1236")]
    packed = subprocess.run(["tar", "tzf", str(out / "seed1235.tgz")], capture_output=True, text=True).stdout.split()
    assert "seed1235/checkpoints/average.ckpt" in packed and not any("epochs" in p for p in packed)
    assert "seed1235: done" in result.stderr


FAKE_DISTILL_PYTHON = """#!/usr/bin/env bash
# run.py ARGS of task=distill: record the call; the first translates (its synthetic stage) and trains on
# until stopped; a later one, its stage done, finishes (metrics.json)
shift
for a in "$@"; do case $a in hydra.run.dir=*) dir=${a#hydra.run.dir=} ;; esac; done
echo "$OMP_NUM_THREADS $*" >> "$CALLS"
if ! grep -qs done "$dir/synthetic/stage.json"; then
  mkdir -p "$dir/synthetic" && echo "translated by $dir" > "$dir/synthetic/train.de"
  touch "$dir/synthetic/train.en" && echo '{"done": true}' > "$dir/synthetic/stage.json"
  exec sleep 60  # the student's training, which the script stops
fi
echo '{}' > "$dir/metrics.json"
"""


def test_the_students_translate_once_on_both_cores_then_train_side_by_side_on_the_same_translations(tmp_path):
    python, calls, runs = tmp_path / "python", tmp_path / "calls.txt", tmp_path / "runs"
    python.write_text(FAKE_DISTILL_PYTHON)
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "CALLS": str(calls), "MEMBERS": "m", "BASELINE": "b"}
    result = subprocess.run(["bash", "experiments/multi30k/distill/run.sh", str(runs)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    student = ["task=distill", "experiment=multi30k_recipe",
               "task.teacher=[experiments/multi30k/multi30k_en_de.ckpt,m/seed1235/checkpoints/average.ckpt,"
               "m/seed1236/checkpoints/average.ckpt]", "task.baseline=b", "seed=1234"]
    lines = [line.split() for line in calls.read_text().splitlines()]
    assert lines[0] == ["2", *student, "progress=false", f"hydra.run.dir={runs}/distilled"]  # alone: translates
    arms = (("distilled", []), ("distilled_orig", ["task.originals_weight=1.0"]))
    assert sorted(lines[1:]) == [["1", *student, *extra, "progress=false", f"hydra.run.dir={runs}/{name}"]
                                 for name, extra in arms]
    assert result.stderr.splitlines()[0] == f"{runs}/distilled: the teacher's translations are done; both students " \
        "train on them"  # then stopped: its run.py's SIGTERM (exit 143) is no failure, and not reported as one
    assert (runs / "distilled_orig/synthetic/train.de").read_text() == f"translated by {runs}/distilled\n"
    again = subprocess.run(["bash", "experiments/multi30k/distill/run.sh", str(runs)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and len(calls.read_text().splitlines()) == 3  # both done: nothing runs


def test_a_first_student_that_fails_before_its_translations_are_done_stops_the_script_in_one_line(tmp_path):
    python, runs = tmp_path / "python", tmp_path / "runs"
    python.write_text("#!/usr/bin/env bash\necho 'error: task.teacher=m: no such checkpoint' >&2\nexit 1\n")
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "MEMBERS": "m"}
    result = subprocess.run(["bash", "experiments/multi30k/distill/run.sh", str(runs)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr == f"{runs}/distilled: exit 1 before its synthetic stage was done ({runs}/distilled.log)\n"
    assert (runs / "distilled.log").read_text() == "error: task.teacher=m: no such checkpoint\n"
    assert not (runs / "distilled_orig").exists()  # the second student never started
