"""Every GPU measurement in one command, for a fresh GPU machine (see README.md).

    python experiments/gpu/run.py [--device cuda|cpu] [--smoke] [--only speed|runs|setup] [--steps A,B,...]
        [--out DIR] [--budget-minutes 25]
    python experiments/gpu/run.py --merge A/results.json B/results.json ... [--out DIR]

Steps, each a process of its own with a time limit, all of them within --budget-minutes: install
the carried wheels (CUDA only, when the project does not import yet), the environment (GPU,
torch, triton, the signature of torch's varlen_attn), then the `speed` group, cheapest and most
important first: `base` (train_speed.py, model=base, 25k-token batches, bf16, eager, with --peer
hf and --profile-steps 3: the same-card baseline), `base+grid` (eager on 16 shapes),
`base+grid+graphs` (compiled on them as CUDA graphs, vocabulary padded to 128s, profiled),
`attention+grid` (attention_speed.py --backends), `loss` (loss_speed.py), `big`, `big+grid`,
`big+grid+graphs`, then `base+compile`, `big+compile` (dynamic shapes), `attention`
(attention_speed.py), `base+packed`, `big+packed`, `base+packed+compile` (recompilations' reasons
logged, TORCH_LOGS=recompiles) and `base+pad8` (lengths padded to multiples of 8); then the
`runs` group: the toy default job, experiment=multi30k_recipe for a fixed number of steps (data:
$DATA_DIR/multi30k, else .gpu-data/multi30k), task=evaluate and decode_speed.py on that run's
checkpoint. --only runs one group, --steps the named steps in the order given. A failed step is
recorded and the next one runs; the exit status is 1 if any step failed.

Writes to --out (default experiments/gpu): results.json (every figure, per step, with its status,
seconds, command and error; meta: GPU, torch, CUDA, date), results.md (the tables) and logs/, each
step's output as it runs. The first two are written again as each step starts and ends (a step
still running reads as failed, "cut short"), so a run stopped from outside still leaves the steps
it finished and the log of the one it was in. Runs, caches, checkpoints and the steps' own JSON
files go to a temporary folder, removed at the end. --merge: the steps of several results.json
files (of `--only speed` and `--only runs`, say) in one results.json and results.md.

--smoke: the same steps at tiny sizes (model=tiny whatever a step's name says, a few steps, a
shape grid of 4 shapes, not 16, and a `big` step that would repeat its `base` step's run
skipped; the compiled steps with aot_eager, inductor's graphs without its code generation, which
takes minutes on a CPU; loss and attention at their --smoke sizes; made-up sentences as a
Multi30k folder, the recipe's 6 steps in batches of 1,500 tokens): a minute or two with --device
cpu. --smoke --device cpu forks the steps' processes from warm.py, which has imported torch,
Lightning and the rest once (each step is still a process of its own, with its own log, limit and
exit status; its seconds leave out those imports).

Only the standard library here (and in machine.py, what the machine has, and results_files.py,
results.json and results.md): every step runs in its own process, so a step that cannot even
import still leaves the others and the report.
"""

import argparse
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from machine import ENVIRONMENT, cuda_libraries, data_dir, datasets_folder, version
from results_files import merged, read_recompiles, save
from warm_client import Warm, log

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
GROUPS = ("speed", "runs", "setup")  # setup: no step, the install and the environment alone


class Runner:
    """Runs the steps, each within its own limit and the overall budget; records how each went.
    Each step's output goes to OUT/logs/<step>.log as it runs, so a command stopped from outside
    keeps it."""

    def __init__(self, out: Path, work: Path, budget_s: float) -> None:
        self.out, self.work, self.deadline = out, work, time.monotonic() + budget_s
        self.steps: dict[str, dict] = {}
        self.save: Callable[[], None] = lambda: None  # writes the results so far (main sets it)
        self.smoke_runs: dict[tuple, str] = {}  # --smoke: each command run so far, and its step
        self.warm: Warm | None = None  # --smoke on the CPU: the steps' processes forked from warm.py
        work.mkdir(parents=True, exist_ok=True)
        (out / "logs").mkdir(parents=True, exist_ok=True)

    def log_of(self, name: str) -> Path:
        return self.out / "logs" / f"{name.replace('/', '_')}.log"

    def run(self, name: str, command: list[str], limit_s: float, env: dict | None = None) -> dict:
        """Run `command`; its record: status ok | failed, seconds, command, error (the output's tail)."""
        shown = " ".join(command) if "-c" not in command else f"{command[0]} -c ..."
        record = {"status": "failed", "command": shown, "figures": {}}
        self.steps[name] = record
        left = self.deadline - time.monotonic()
        if left < 5:
            record["error"] = "not run: the time budget was spent"
            log(f"{name}: not run (time budget spent)")
            return record
        record["error"] = "cut short: the run was stopped while this step ran"  # until it ends
        self.save()
        log(f"{name}: {shown}")
        output = self.log_of(name)
        started = time.monotonic()
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        with open(output, "w") as sink:
            try:
                warm = self.warm and self.warm.takes(command)
                code = self.warm.run(command, environment, sink, min(limit_s, left)) if warm else None
                if code is None:
                    code = subprocess.run(command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, env=environment,
                                          timeout=min(limit_s, left)).returncode
            except subprocess.TimeoutExpired:
                code = None
        record["seconds"] = round(time.monotonic() - started, 1)
        text = output.read_text(errors="replace")
        if code == 0:
            record["status"] = "ok"
            del record["error"]
        else:
            reason = f"exit status {code}" if code is not None else f"timed out after {min(limit_s, left):.0f} s"
            record["error"] = "\n".join([reason, *text.strip().splitlines()[-15:]])
        log(f"{name}: {record['status']} ({record['seconds']} s)")
        return record

    def fail(self, name: str, error: str) -> None:
        self.steps[name] = {"status": "failed", "error": error, "figures": {}}
        log(f"{name}: failed: {error}")


def install(runner: Runner, device: str) -> None:
    """The carried wheels, then the project (editable), as ../shared/gpu/README.md says: on CUDA
    only, and only when the project does not import yet."""
    probe = [PY, "-c", "import transformer_mt, hydra, omegaconf, datasets"]
    if device == "cpu" or subprocess.run(probe, cwd=ROOT, capture_output=True).returncode == 0:
        runner.steps["install"] = {"status": "skipped", "figures": {},
                                   "note": "--device cpu" if device == "cpu" else "already installed"}
        return
    if not glob.glob(str(ROOT / ".gpu-wheels" / "*.whl")):
        runner.fail("install", "no .gpu-wheels/*.whl: fill it with experiments/gpu/wheels.sh and carry it")
        return
    folder = datasets_folder()
    script = (f"{PY} -m pip install -q --no-index --no-deps .gpu-wheels/*.whl .gpu-wheels/{folder}/*.whl && "
              f"{PY} -m pip install -q --no-deps --no-build-isolation -e .")
    record = runner.run("install", ["bash", "-c", script], 300)
    record["note"] = (f"datasets from .gpu-wheels/{folder} (pyarrow {'.'.join(map(str, version('pyarrow')))}, "
                      f"huggingface_hub {'.'.join(map(str, version('huggingface_hub')))})")


def environment(runner: Runner) -> dict:
    record = runner.run("environment", [PY, "-c", ENVIRONMENT], 120)
    if record["status"] == "ok":
        record["figures"] = json.loads(runner.log_of("environment").read_text().strip().splitlines()[-1])
    return record["figures"]


def loop_speed_command(short: str, smoke: bool, device: str, result: Path) -> tuple[list[str], float]:
    """train_speed.py's command line for a step named model[+packed][+compile][+pad8][+grid[+graphs]],
    and its time limit. The eager padded one (the baseline) also with the HF peer and a profile.
    pad8: lengths padded to a multiple of 8; grid: batches of 16 shapes (data.shape_grid); graphs:
    on them, the step compiled on static shapes with CUDA graphs (module.compile_mode=reduce-overhead)
    and the vocabulary padded to a multiple of 128, profiled as the baseline is. --smoke:
    model=tiny whatever the name says, aot_eager for inductor (no code generation, no mode), a grid of 4."""
    model, *options = short.split("+")
    graphs, grid = "graphs" in options, "grid" in options
    compile_, baseline = "compile" in options or graphs, not options
    precision = "32-true" if device == "cpu" else "bf16-mixed"
    sizes = (["--tokens", "1000", "--steps", "2", "--warmup", "1", "--vocab", "8000"] if smoke
             else ["--tokens", "25000", "--steps", "30", "--warmup", "10" if compile_ else "5"])
    command = [PY, "experiments/benchmarks/train_speed.py", "--model", "tiny" if smoke else model,
               "--device", device, "--precision", precision, *sizes, "--json", str(result),
               *(["--compile", "aot_eager" if smoke else "inductor"] if compile_ else []),
               *(["--packed"] if "packed" in options else []),
               *(["--pad-to-multiple", "8"] if "pad8" in options else []),
               *(["--shape-grid", "4" if smoke else "16"] if grid else []),
               *(["--vocab-multiple", "128"] if graphs else []),
               *(["--compile-mode", "reduce-overhead"] if graphs and not smoke else []),
               *(["--peer", "hf"] if baseline else []),
               *(["--profile-steps", "2" if smoke else "3"] if baseline or graphs else [])]
    return command, 240 if smoke else (360 if graphs else 300 if compile_ else 240 if baseline else 180)


def train_speed(runner: Runner, short: str, smoke: bool, device: str) -> None:
    """train_speed.py for a step (train_speed/<short>: `loop_speed_command`). Compiled steps log
    every recompilation's reason (TORCH_LOGS=recompiles), counted in the figures."""
    result = runner.work / f"train_speed_{short}.json"
    command, limit = loop_speed_command(short, smoke, device, result)
    compile_ = "--compile" in command
    name = f"train_speed/{short}"
    same = tuple(a for a in command if a != str(result))
    if smoke and same in runner.smoke_runs:  # big and base are both tiny at smoke sizes
        runner.steps[name] = {"status": "skipped", "figures": {},
                              "note": f"--smoke: the same run as {runner.smoke_runs[same]} at smoke sizes"}
        return
    runner.smoke_runs[same] = name
    record = runner.run(name, command, limit, env={"TORCH_LOGS": "recompiles"} if compile_ else None)
    if result.is_file():
        record["figures"] = json.loads(result.read_text())
    read_recompiles(record, runner.log_of(name))  # also for a step cut short: why its warm-up ran long


def benchmark(runner: Runner, name: str, smoke: bool, device: str) -> None:
    """loss_speed.py, attention_speed.py or attention_speed.py --backends (step attention_backends;
    --smoke sizes with --smoke; the loss with --compile on a GPU)."""
    result = runner.work / f"{name}.json"
    options = ["--smoke"] if smoke else ["--compile"] if name == "loss_speed" and device == "cuda" else []
    script, backends = ("attention_speed", ["--backends"]) if name == "attention_backends" else (name, [])
    command = [PY, f"experiments/benchmarks/{script}.py", *backends, "--device", device, *options, "--json",
               str(result)]
    record = runner.run(name, command, 120 if smoke else 240 if name == "loss_speed" else 150)
    if result.is_file():
        record["figures"] = json.loads(result.read_text())


def run_figures(run_dir: Path) -> dict:
    """A run's metrics.json, with the means of the health columns of csv/metrics.csv over the
    second half of the logged training steps."""
    figures: dict = {}
    metrics, curves = run_dir / "metrics.json", run_dir / "csv" / "metrics.csv"
    if metrics.is_file():
        figures.update(json.loads(metrics.read_text()))
    if curves.is_file():
        with open(curves) as f:
            rows = list(csv.DictReader(f))
        for column in ("train/tokens_per_sec", "train/tflops", "train/mfu", "train/gpu_mem_gb", "train/padding"):
            values = [float(r[column]) for r in rows if r.get(column)]
            if values:
                half = values[len(values) // 2:]
                figures[f"{column} (mean, 2nd half)"] = sum(half) / len(half)
    return figures


def train_job(runner: Runner, name: str, overrides: list[str], limit_s: float, env: dict | None = None) -> Path:
    """`python run.py OVERRIDES` into WORK/runs/<name>; its figures into the step's record."""
    run_dir = runner.work / "runs" / name
    command = [PY, "run.py", *overrides, "logger=csv", "~callbacks.rich_progress_bar", f"hydra.run.dir={run_dir}",
               f"paths.cache_dir={runner.work / 'cache'}"]
    record = runner.run(name, command, limit_s, env)
    record["figures"] = run_figures(run_dir)
    if record["status"] == "ok" and "test/bleu" not in record["figures"]:
        record["status"], record["error"] = "failed", "the run wrote no test/bleu (metrics.json)"
    return run_dir


def decode(runner: Runner, run_dir: Path, data: Path, device: str, smoke: bool) -> None:
    """decode_speed.py on the run's tested checkpoint (its averaged one) and test2016."""
    result = runner.work / "decode.json"
    metrics = run_dir / "metrics.json"
    ckpt = json.loads(metrics.read_text()).get("tested_checkpoint") if metrics.is_file() else None
    ckpt = ckpt or next(iter(sorted((run_dir / "checkpoints").glob("*.ckpt"))), None)
    if not ckpt:
        runner.fail("decode", f"no checkpoint in {run_dir} (the multi30k step failed)")
        return
    command = [PY, "experiments/benchmarks/decode_speed.py", "--ckpt", str(ckpt), "--source",
               str(data / "multi30k" / "test2016.en"), "--reference", str(data / "multi30k" / "test2016.de"),
               "--device", device, "--dtype", "fp32" if device == "cpu" else "bf16",
               "--repeat", "1" if smoke else "3", "--json", str(result), *(["--limit", "20"] if smoke else [])]
    record = runner.run("decode", command, 240 if smoke else 300, env=cuda_libraries() if device == "cuda" else None)
    if result.is_file():
        record["figures"] = json.loads(result.read_text())


def evaluate(runner: Runner, run_dir: Path, overrides: list[str], data: Path) -> None:
    """task=evaluate on the run's tested checkpoint with the run's settings: its test BLEU must equal the run's."""
    metrics = run_dir / "metrics.json"
    run = json.loads(metrics.read_text()) if metrics.is_file() else {}
    if not run.get("tested_checkpoint"):
        runner.fail("evaluate", f"no tested checkpoint in {metrics} (the multi30k step failed)")
        return
    out = runner.work / "runs" / "evaluate"
    command = [PY, "run.py", "task=evaluate", f"ckpt_path={run['tested_checkpoint']}", *overrides,
               f"hydra.run.dir={out}", f"paths.cache_dir={runner.work / 'cache'}"]
    record = runner.run("evaluate", command, 300, env={"DATA_DIR": str(data)})
    figures = json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").is_file() else {}
    record["figures"] = {**{k: v for k, v in figures.items() if k.startswith("test/")},
                         "run test/bleu": run.get("test/bleu"),
                         "reproduced": figures.get("test/bleu") == run.get("test/bleu")}
    if record["status"] == "ok" and not record["figures"]["reproduced"]:
        record["status"] = "failed"
        record["error"] = f"test/bleu {figures.get('test/bleu')} differs from the run's {run.get('test/bleu')}"


# the speed group, most important first (a run cut short keeps the first ones): the eager steps,
# then the compiled ones (a slow cold compilation can only cost the last figures)
SPEED = ("base", "base+grid", "base+grid+graphs", "attention+grid", "loss", "big", "big+grid", "big+grid+graphs",
         "base+compile", "big+compile", "attention", "base+packed", "big+packed", "base+packed+compile", "base+pad8")
# short name: the step's (the script's)
BENCHMARKS = {"loss": "loss_speed", "attention": "attention_speed", "attention+grid": "attention_backends"}
RUNS = ("toy", "multi30k", "evaluate", "decode")


def full_name(short: str) -> str:
    """A step's name in the results from its short name: `base+compile` -> train_speed/base+compile,
    `loss` -> loss_speed; the runs keep theirs."""
    short = short.removeprefix("train_speed/")
    return BENCHMARKS.get(short) or (short if short in RUNS else f"train_speed/{short}")


def step_names(only: str | None, steps: str | None) -> list[str]:
    """The steps to run, in this order: --steps as given (by their short names: `base`, `loss`,
    `base+compile`, `toy`), else both groups or the one --only names (`setup`: none, the install and
    the environment alone)."""
    short = [*SPEED, *RUNS]
    speed = [full_name(n) for n in SPEED]
    if not steps:
        return [*(speed if only in (None, "speed") else []), *(RUNS if only in (None, "runs") else [])]
    for name in steps.split(","):
        if full_name(name) not in map(full_name, short):
            raise SystemExit(f"error: --steps: no step {name.removeprefix('train_speed/')!r}; the steps are "
                             f"{', '.join(short)}")
    return [full_name(name) for name in steps.split(",")]


def run_step(runner: Runner, name: str, smoke: bool, device: str) -> None:
    """One step by its name; the multi30k run's folder is where evaluate and decode look for it."""
    if name.startswith("train_speed/"):
        train_speed(runner, name.removeprefix("train_speed/"), smoke, device)
        return
    if name in BENCHMARKS.values():
        benchmark(runner, name, smoke, device)
        return
    trainer = ["trainer=cpu"] if device == "cpu" else ["trainer=gpu", "trainer.precision=bf16-mixed"]
    few = ["trainer.log_every_n_steps=1"] if smoke else []  # the health figures of a few steps
    if name == "toy":
        toy = ["trainer.max_epochs=1", "data.corpora.toy.num_train=300", "data.corpora.toy.num_val=10",
               "data.corpora.toy.num_test=7"]
        train_job(runner, "toy", [trainer[0], *(toy + few if smoke else [])], 240 if smoke else 360)
        return
    data = data_dir(smoke, runner.work)
    if data is None:
        runner.fail(name, "no Multi30k: set DATA_DIR (DATA_DIR/multi30k/train.en, ...) or copy it to "
                    ".gpu-data/multi30k (experiments/gpu/README.md)")
        return
    recipe = ["experiment=multi30k_recipe", *trainer]  # the recipe says 32-true: bf16 on CUDA
    if smoke:  # 3 batches an epoch of the 300 made-up pairs: 6 steps in 2 epochs (2 validations, 2 checkpoints)
        recipe.append("data.max_tokens=1500")
    run_dir = runner.work / "runs" / "multi30k"
    if name == "multi30k":
        overrides = [*recipe, f"trainer.max_steps={6 if smoke else 2000}", "trainer.max_time=null", *few]
        train_job(runner, "multi30k", overrides, 240 if smoke else 420, env={"DATA_DIR": str(data)})
    elif name == "evaluate":
        evaluate(runner, run_dir, recipe, data)
    else:
        decode(runner, run_dir, data, device, smoke)


def write(out: Path, meta: dict, steps: dict) -> int:
    """results.json and results.md, the last time; 1 if any step failed."""
    failed = save(out, meta, steps)
    log(f"wrote {out / 'results.json'} and {out / 'results.md'}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0




def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: a minute or two in all")
    parser.add_argument("--only", choices=GROUPS, help="one group of steps (default: both)")
    parser.add_argument("--steps", help="these steps in this order, comma-separated: " + ", ".join([*SPEED, *RUNS]))
    parser.add_argument("--out", type=Path, default=ROOT / "experiments" / "gpu")
    parser.add_argument("--budget-minutes", type=float, default=25.0, help="for all steps together")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="RESULTS_JSON", help="merge these, run nothing")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        return write(out, *merged(args.merge))
    names = step_names(args.only, args.steps)
    meta = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "device": args.device, "smoke": args.smoke,
            "command": " ".join(["experiments/gpu/run.sh", *sys.argv[1:]])}
    work = Path(tempfile.mkdtemp(prefix="gpu-run-"))
    runner = Runner(out, work, 60 * args.budget_minutes)
    runner.save = lambda: save(out, meta, runner.steps)
    try:
        install(runner, args.device)
        if args.smoke and args.device == "cpu" and runner.deadline - time.monotonic() >= 5:
            warm = os.environ.get("GPU_RUN_WARM")  # a warm.py listening there already (the tests')
            runner.warm = Warm(ROOT, warm) if warm else Warm.start(work, ROOT, min(180, runner.deadline
                                                                                   - time.monotonic()))
        meta.update(environment(runner))
        for name in names:
            run_step(runner, name, args.smoke, args.device)
            runner.save()  # with the step's figures: a run stopped later still has them
    finally:
        if runner.warm:
            runner.warm.close()
        shutil.rmtree(work, ignore_errors=True)
    return write(out, meta, runner.steps)


if __name__ == "__main__":
    sys.exit(main())
