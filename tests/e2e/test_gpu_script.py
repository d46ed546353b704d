"""experiments/gpu/run.sh, the one command of a GPU machine, at smoke sizes on the CPU: the command
its README gives runs every step and leaves its figures in results.json and results.md; a step
that does not run is reported and fails the command."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.helpers import ROOT, python, warm_server

# the script's steps, statuses and files, and figures that are there (not their values): not run
# again under the portable profile (tests/training/test_compile.py checks the compiled steps there)
pytestmark = pytest.mark.cli


def run_script(out: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    env.pop("DATA_DIR", None)  # --smoke then writes its own Multi30k-shaped folder
    server = warm_server({**os.environ, "PYTHONWARNINGS": "ignore"})
    if server is not None:  # the steps forked from this worker's warm.py rather than from one of their own
        env |= {"GPU_RUN_WARM": server.path, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run(["bash", "experiments/gpu/run.sh", "--device", "cpu", "--out", str(out), *args],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    results_file = out / "results.json"
    assert results_file.is_file(), result.stderr[-3000:]
    return result, json.loads(results_file.read_text())


def numbers(value) -> list[float]:
    """Every number in a JSON value."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [n for v in value for n in numbers(v)] if isinstance(value, list) else []


def readme_command() -> list[str]:
    """The command experiments/gpu/README.md gives for the GPU machine: the line after its marker."""
    lines = (ROOT / "experiments/gpu/README.md").read_text().splitlines()
    marker = next(i for i, line in enumerate(lines) if line.startswith("<!-- the GPU command"))
    assert lines[marker + 1] == "```bash"
    return shlex.split(lines[marker + 2])


SPEED = ["base", "base+grid", "base+grid+graphs", "attention+grid", "loss", "big", "big+grid", "big+grid+graphs",
         "base+compile", "big+compile", "attention", "base+packed", "big+packed", "base+packed+compile",
         "base+pad8"]  # cheapest and most important first
BENCHMARKS = {"loss": "loss_speed", "attention": "attention_speed", "attention+grid": "attention_backends"}
SPEED_STEPS = [BENCHMARKS.get(n, f"train_speed/{n}") for n in SPEED]
README_SPEED = SPEED[:10]  # the steps of issue 67 and the dynamic compiled ones to compare with
README_STEPS = SPEED_STEPS[:10]
RUN_STEPS = ["toy", "multi30k", "evaluate", "decode"]
KINDS = ["encoder_self", "decoder_self", "cross"]


def test_the_readme_gives_one_command_in_the_order_eager_first_compiled_last_within_the_tools_limit():
    command = readme_command()
    assert command[:2] == ["bash", "experiments/gpu/run.sh"]
    options = dict(zip(command[2::2], command[3::2]))
    assert options["--out"] == "$OUT"
    assert options["--steps"].split(",") == README_SPEED
    assert 5 <= float(options["--budget-minutes"]) < 8  # the README's timeout_s is 480: the steps stop first
    assert 'timeout_s: 480' in (ROOT / "experiments/gpu/README.md").read_text()


def check_speed_steps(steps: dict, markdown: str) -> None:
    """The figures of the README's command: throughput (the baseline with its profile), packed,
    compiled, the fused loss, packed attention."""
    speed = steps["train_speed/base"]["figures"]
    assert speed["model"] == "tiny" and speed["compile"] is False  # --smoke: tiny whatever the name says
    systems = {s["system"]: s for s in speed["systems"]}
    assert set(systems) == {"ours", "HF MarianMTModel"}
    for figures in systems.values():
        assert figures["steps"] == 2
        assert figures["target_tokens_per_s"] > 0 and figures["tokens_per_s"] > figures["target_tokens_per_s"]
        assert figures["step_ms"] > 0 and figures["tflops"] > 0 and figures["mfu"] > 0
        assert 0 <= figures["padding"] < 1
    assert speed["peak_source"] == "measured matmul" and speed["peak_tflops"] > 0
    attention = speed["attention"]
    assert {kind: a["backend"] for kind, a in attention.items()} == dict.fromkeys(
        KINDS, "flash")  # torch's CPU flash kernel runs all three
    assert attention["decoder_self"]["mask"] is None and attention["decoder_self"]["is_causal"] is True

    profile = systems["ours"]["profile"]  # the baseline's --profile-steps: where a step's time goes
    assert profile["steps"] == 2 and profile["basis"] == "CPU op self time"
    assert "profile" not in systems["HF MarianMTModel"]
    parts = profile["ms_per_step"]
    assert list(parts) == ["matmul", "attention", "loss", "elementwise", "optimizer", "other", "idle"]
    assert all(v >= 0 for v in parts.values()) and parts["matmul"] > 0 and parts["attention"] > 0 and parts["loss"] > 0
    assert sum(parts.values()) == pytest.approx(profile["wall_ms_per_step"], rel=0.1)

    for name in ("big", "big+grid", "big+grid+graphs", "big+compile"):  # at smoke sizes, big is base
        base = name.replace("big", "base")
        assert steps[f"train_speed/{name}"] == {
            "status": "skipped", "figures": {}, "note": f"--smoke: the same run as train_speed/{base} at smoke sizes"}
    for name in ("base+grid", "base+grid+graphs"):  # data.shape_grid: at most 4 shapes (--smoke), all in the warm-up
        grid = steps[f"train_speed/{name}"]["figures"]
        [ours] = grid["systems"]
        assert grid["shape_grid"] == ours["shape_grid"] == 4 and ours["steps"] == 2 and ours["mfu"] > 0
        assert ours["warmup_steps"] >= 1 and 0 <= ours["padding"] < 1
    graphs = steps["train_speed/base+grid+graphs"]["figures"]  # aot_eager with --smoke: no mode
    [ours] = graphs["systems"]
    assert graphs["compile"] == "aot_eager" and graphs["vocab_multiple"] == 128 and ours["profile"]["steps"] == 2
    # static shapes: each layer region compiled once per shape (torch logs each new one as a
    # recompilation, a size mismatch), all of them in the warm-up, the loss's chunk once
    assert 2 <= ours["grid_shapes"] <= 4 and ours["graphs"] == 2 * ours["grid_shapes"] + 1
    assert len(graphs["recompiles"]) == 2 * (ours["grid_shapes"] - 1)
    assert all("size mismatch" in reason for reason in graphs["recompiles"])
    compiled = steps["train_speed/base+compile"]["figures"]  # dynamic shapes: three graphs
    assert compiled["compile"] == "aot_eager" and compiled["systems"][0]["graphs"] >= 3
    assert compiled["recompiles"] == []  # what TORCH_LOGS=recompiles would have said
    check_kernel_steps(steps, markdown)


def check_kernel_steps(steps: dict, markdown: str) -> None:
    """The fused loss against the previous one, packed attention against padded, and the headings."""
    loss = steps["loss_speed"]["figures"]
    [width] = loss["widths"]
    loss_systems = {s["system"]: s for s in width["systems"]}
    for name in ("previous", "fused"):
        assert loss_systems[name]["ms"] > 0 and loss_systems[name]["grad_rel_diff"] < 1e-4
    assert loss_systems["fused"]["loss_diff"] < 1e-5
    assert {loss_systems[n]["status"] for n in ("fused+compile", "liger")} == {"skipped"}  # no --compile, no CUDA
    backends = steps["attention_backends"]["figures"]
    assert list(backends["kinds"]) == KINDS and 1 <= len(backends["shapes"]) <= 3  # --smoke: a grid of 3
    for named in backends["kinds"].values():
        assert named["math"]["ms"] > 0 and named["math"]["first_ms"] > 0
        assert "error" in named["cudnn"]  # no CUDA here: torch refuses cuDNN's kernel, said in the table
    assert loss_systems["fused, vocab /128"]["ms"] > 0 and loss_systems["fused, vocab /128"]["loss_diff"] < 1e-5
    for heading in ("## Training throughput", "## Attention kernels", "## Where a step's time goes",
                    "## Output layer + loss", "## Attention backends on the shape grid"):
        assert heading in markdown
    assert "| tiny | ours | false | - | - | false | 32-true |" in markdown  # compile, mode, shapes, packed
    assert "| tiny | ours | false | - | 4 | false | 32-true |" in markdown
    assert "| tiny | ours | aot_eager | - | 4 | false | 32-true |" in markdown
    assert "| decoder_self | cudnn | - | - |" in markdown


def check_run_steps(steps: dict, markdown: str) -> None:
    """The figures of `--only runs`: two training runs, task=evaluate reproducing one, decoding speed."""
    for run in ("toy", "multi30k"):
        figures = steps[run]["figures"]
        assert 0 <= figures["test/bleu"] <= 100 and figures["steps"] > 0 and figures["tokens_per_sec"] > 0
        assert figures["train/tflops (mean, 2nd half)"] > 0  # StepMeter, timed on the host clock
    assert steps["multi30k"]["figures"]["steps"] == 6
    evaluated = steps["evaluate"]["figures"]  # task=evaluate on the run's tested checkpoint gives the run's BLEU
    assert evaluated["reproduced"] is True and evaluated["test/bleu"] == steps["multi30k"]["figures"]["test/bleu"]
    decoded = numbers(steps["decode"]["figures"])
    assert decoded and max(decoded) > 0
    assert steps["decode"]["figures"]["source"] == "$WORK/smoke-data/multi30k/test2016.en"
    for heading in ("## Training runs", "## Decoding"):
        assert heading in markdown


@pytest.mark.slow
@pytest.mark.parametrize("part", ["readme", "runs"])  # the two halves of one --smoke run, one per xdist worker
def test_smoke_run_on_cpu_reports_every_section_with_numbers(tmp_path, part):
    """`readme`: the README's GPU command as written, with --device cpu --smoke; `runs`: --only runs."""
    if part == "readme":
        command = readme_command()
        args = [a.replace("$OUT", str(tmp_path)) for a in command[2:]]
        result, results = run_script(tmp_path, *args, "--smoke")
    else:
        result, results = run_script(tmp_path, "--smoke", "--only", "runs")
    steps = results["steps"]
    failures = {name: step.get("error") for name, step in steps.items() if step["status"] == "failed"}
    assert result.returncode == 0 and results["failed"] == [] and not failures, failures
    assert list(steps) == ["install", "environment", *(README_STEPS if part == "readme" else RUN_STEPS)]
    assert steps["install"]["status"] == "skipped"  # --device cpu
    environment = steps["environment"]["figures"]
    assert "window_size" in environment["varlen_attn_signature"] and environment["varlen_kernel_used"] is True
    assert results["meta"]["torch"] == torch.__version__ and results["meta"]["date"].startswith("20")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "results.json", "results.md"]  # what $OUT returns
    assert sorted(p.stem for p in (tmp_path / "logs").iterdir()) == sorted(  # each step's output, as it ran
        n.replace("/", "_") for n, step in steps.items() if step["status"] != "skipped")
    for name in ("results.json", "results.md"):  # committed as they are: no folder of the machine in them
        text = (tmp_path / name).read_text()
        assert str(ROOT) not in text and "gpu-run-" not in text and str(tmp_path) not in text
    markdown = (tmp_path / "results.md").read_text()
    assert "## Steps" in markdown
    (check_speed_steps if part == "readme" else check_run_steps)(steps, markdown)


PREFIX = "V1127 09:53:46.365000 5458 torch/_dynamo/guards.py:5396] [0/1] [__recompiles] "
RECOMPILES = "\n".join(PREFIX + line for line in [
    "Recompiling function compiled_encoder_layer in src/transformer_mt/training/compiled.py:15",
    "    triggered by the following guard failure(s):",
    "    - 0/0: 2 <= args[1].size()[0]  # return F.linear(input, self.weight, self.bias)"]) + "\nstep 3 done"


def test_a_compiled_step_cut_short_keeps_its_recompilations_and_the_tables_are_still_written(tmp_path):
    """The compiled step that runs out of time in its warm-up (as on the H200) leaves no figures: its
    recompilations, read from torch's `recompiles` log in its log, are kept on the step (--merge reads
    them again where a step was cut short from outside), and results.md is still written (it once
    raised KeyError)."""
    (tmp_path / "part" / "logs").mkdir(parents=True)
    compiled = {"status": "failed", "error": "timed out after 146 s", "figures": {},
                "command": "python experiments/benchmarks/train_speed.py --model base --compile inductor"}
    steps = {"train_speed/base+compile": compiled, "train_speed/big+compile": dict(compiled)}
    (tmp_path / "part" / "results.json").write_text(json.dumps(
        {"meta": {"date": "2026-11-28", "smoke": False, "command": "run.sh"}, "failed": list(steps), "steps": steps}))
    (tmp_path / "part" / "logs" / "train_speed_base+compile.log").write_text(RECOMPILES)
    (tmp_path / "part" / "logs" / "train_speed_big+compile.log").write_text("nothing to see")
    merged = subprocess.run([sys.executable, "experiments/gpu/run.py", "--merge", str(tmp_path / "part/results.json"),
                             "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert merged.returncode == 1, merged.stderr  # a failed step
    steps = json.loads((tmp_path / "out" / "results.json").read_text())["steps"]
    assert steps["train_speed/base+compile"]["figures"] == {}
    assert steps["train_speed/base+compile"]["recompiles"] == ["compiled_encoder_layer: 0/0: 2 <= args[1].size()[0]"]
    assert steps["train_speed/big+compile"]["recompiles"] == []
    assert "| train_speed/base+compile | failed |" in (tmp_path / "out" / "results.md").read_text()


def test_steps_that_cannot_run_are_reported_fail_the_command_and_parts_merge(tmp_path):
    speed, speed_results = run_script(tmp_path / "speed", "--smoke", "--only", "speed", "--budget-minutes", "0")
    runs, runs_results = run_script(tmp_path / "runs", "--smoke", "--only", "runs", "--budget-minutes", "0")
    assert speed.returncode == runs.returncode == 1
    assert speed_results["failed"] == ["environment", *(s for s in SPEED_STEPS if "/big" not in s)]
    assert {speed_results["steps"][s]["status"] for s in SPEED_STEPS if "/big" in s} == {"skipped"}  # base's run
    assert runs_results["failed"] == ["environment", "toy", "multi30k", "evaluate", "decode"]
    for name, step in {**speed_results["steps"], **runs_results["steps"]}.items():
        skipped = name == "install" or "/big" in name
        assert step["status"] == ("skipped" if skipped else "failed") and (step.get("error") or step["note"])
    merged = subprocess.run([sys.executable, "experiments/gpu/run.py", "--merge", str(tmp_path / "speed/results.json"),
                             str(tmp_path / "runs/results.json"), "--out", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert merged.returncode == 1
    results = json.loads((tmp_path / "results.json").read_text())
    assert list(results["steps"]) == ["install", "environment", *SPEED_STEPS, *RUN_STEPS]
    assert "| toy | failed |" in (tmp_path / "results.md").read_text()


def test_steps_runs_the_named_steps_in_its_order_and_names_an_unknown_one(tmp_path):
    result, results = run_script(tmp_path / "some", "--smoke", "--steps", "multi30k,attention,base+packed,loss",
                                 "--budget-minutes", "0")
    assert list(results["steps"]) == ["install", "environment", "multi30k", "attention_speed",
                                      "train_speed/base+packed", "loss_speed"]
    unknown = subprocess.run(["bash", "experiments/gpu/run.sh", "--device", "cpu", "--steps", "base,huge", "--out",
                              str(tmp_path / "unknown")], cwd=ROOT, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert unknown.returncode == 1 and unknown.stderr.strip().splitlines() == [
        f"error: --steps: no step 'huge'; the steps are {', '.join(SPEED)}, toy, multi30k, evaluate, decode"]
    assert not (tmp_path / "unknown" / "results.json").exists()
    _, setup = run_script(tmp_path / "setup", "--only", "setup", "--budget-minutes", "0")
    assert list(setup["steps"]) == ["install", "environment"]  # --only setup: the install and the environment alone


def test_the_results_are_written_as_each_step_starts_so_a_run_stopped_from_outside_keeps_them(tmp_path):
    """A run stopped from outside (SIGKILL) while its `toy` step runs: results.json and results.md
    say the step was cut short, its log is there, and the step that ended before it is ok."""
    out, env = tmp_path / "out", {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    process = subprocess.Popen(["bash", "experiments/gpu/run.sh", "--device", "cpu", "--steps", "toy", "--out",
                                str(out)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "toy" not in steps_so_far(out) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    results = json.loads((out / "results.json").read_text())
    assert results["steps"]["toy"]["status"] == "failed" and results["failed"][-1] == "toy"
    assert results["steps"]["toy"]["error"].startswith("cut short")  # what a stop leaves
    assert results["steps"]["environment"]["status"] == "ok" and "error" not in results["steps"]["environment"]
    assert (out / "logs" / "toy.log").is_file() and "| toy | failed |" in (out / "results.md").read_text()


def steps_so_far(out: Path) -> dict:
    """The steps results.json holds now (none while it is not there or half written)."""
    try:
        return json.loads((out / "results.json").read_text())["steps"]
    except (OSError, ValueError):
        return {}


def test_a_peer_that_cannot_load_or_translate_is_named_and_the_others_still_run(tmp_path):
    """decode_speed.py with CTranslate2 given no threads to translate in: it is listed as skipped
    with the first line of its error, and ours is still measured."""
    lines = ["A man is riding a bicycle.", "Two dogs play in the snow.", "A girl eats an apple."]
    (tmp_path / "src.txt").write_text("".join(line + "\n" for line in lines))
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run([python(env), "experiments/benchmarks/decode_speed.py", "--ckpt",
                             "experiments/multi30k/multi30k_en_de.ckpt", "--source", str(tmp_path / "src.txt"),
                             "--reference", str(tmp_path / "src.txt"), "--repeat", "1", "--ct2-inter", "0", "--only",
                             "ours float32", "CTranslate2 float32", "--json", str(tmp_path / "out.json")], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads((tmp_path / "out.json").read_text())
    assert figures["skipped"] == {"CTranslate2 float32": "ValueError: max_workers must be greater than 0"}
    assert [(r["system"], r["search"]) for r in figures["systems"]] == [("ours float32", "greedy"),
                                                                        ("ours float32", "beam 4")]
    assert "CTranslate2 float32: not measured: ValueError" in result.stdout


def machine(tmp_path: Path, **versions: str) -> dict:
    """experiments/gpu/machine.py's JSON on a machine with these versions of pyarrow and huggingface_hub
    (dist-info folders first on the import path) and tmp_path/nvidia/{cublas,cudnn}/lib."""
    for package, version in versions.items():
        (tmp_path / f"{package}-{version}.dist-info").mkdir(exist_ok=True)
        (tmp_path / f"{package}-{version}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "LD_LIBRARY_PATH": "/opt/lib"}
    result = subprocess.run([sys.executable, "experiments/gpu/machine.py"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for folder in tmp_path.glob("*.dist-info"):
        for file in folder.iterdir():
            file.unlink()
        folder.rmdir()
    return json.loads(result.stdout)


def test_install_picks_the_datasets_wheels_the_machines_pyarrow_and_hub_can_run(tmp_path):
    for arrow, hub, folder in [("25.0", "1.33", "datasets-5"), ("25.0", "0.36", "datasets-4.4"),
                               ("23.0", "1.33", "datasets-4.4"), ("21.0", "0.30", "datasets-4.4"),
                               ("20.0", "0.30", "datasets-4.0"), ("25.0", "2.1", "datasets-5"),
                               ("23.0", "2.1", "datasets-4.0"), ("25.0", "unknown", "datasets-4.4")]:
        found = machine(tmp_path, pyarrow=arrow, huggingface_hub=hub)
        assert found["datasets_folder"] == folder, (arrow, hub)
    assert found["huggingface_hub"] == [0, 0]  # a version it cannot read counts as none


def test_decoding_on_cuda_finds_the_cuda_libraries_of_torchs_packages(tmp_path):
    for name in ("cublas", "cudnn"):
        (tmp_path / "nvidia" / name / "lib").mkdir(parents=True)
    assert machine(tmp_path)["LD_LIBRARY_PATH"].split(os.pathsep) == [
        str(tmp_path / "nvidia/cublas/lib"), str(tmp_path / "nvidia/cudnn/lib"), "/opt/lib"]
