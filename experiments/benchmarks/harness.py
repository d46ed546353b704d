"""The benchmarks' one harness: systems measured round after round, each round in a new order (two
systems alternate), in this process or each run in a fresh one (alone, or beside busy processes);
best times, medians and per-round ratios; the machine described once; a result as Markdown on stdout
and JSON. Why ours and not pyperf: README.md. Only the standard library at import (a checkout's
older src can run a script that imports it)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUSY = "while True: pass"  # a busy process: --load


def parser(doc: str, device: str | None = None, with_json: bool = True) -> argparse.ArgumentParser:
    """A script's parser: its docstring as the help, --json, and --device (default `device`) if given."""
    out = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if with_json:
        out.add_argument("--json", type=Path, help="write every figure here as JSON")
    if device is not None:
        out.add_argument("--device", default=device, choices=["cpu", "cuda"])
    return out


def machine(device: str = "cpu") -> dict:
    """The machine a result was measured on: the device, the CPU (its model, and the vector
    extensions torch and CTranslate2 may use), its cores, torch's version and threads."""
    import torch

    from transformer_mt.model.kernels import cpu

    gpu = device.startswith("cuda")
    return {"device_name": torch.cuda.get_device_name(device) if gpu else "CPU", "cpu": cpu(),
            "cores": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads()}


def described(figures: dict) -> str:
    """The machine of `machine` in one line."""
    cpu = figures["cpu"]
    gpu = "" if figures["device_name"] == "CPU" else f"{figures['device_name']}; "
    return (f"{gpu}{cpu['model']} ({', '.join(cpu['flags']) or 'no AVX2'}), {figures['cores']} cores, "
            f"torch {figures['torch']}, {figures['threads']} threads")


def order(names: Sequence, round_: int) -> list:
    """The order of round `round_`: rotated by one each round, so each name goes first in turn."""
    k = round_ % len(names)
    return [*names[k:], *names[:k]]


def rounds(runs: dict[str, Callable[[], object]], count: int, label: str | None = None) -> list[dict]:
    """Each of `runs` called once a round for `count` rounds, in `order`: each round's results by
    name (`label`: a line on stderr as each round ends)."""
    measured = []
    for r in range(count):
        measured.append({name: runs[name]() for name in order(list(runs), r)})
        if label:
            print(f"[{label}] round {r + 1} of {count} done", file=sys.stderr, flush=True)
    return measured


def sync(device) -> None:
    """Wait for the device's queue (a GPU's) to drain."""
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def timed(run: Callable[[], object], device="cpu") -> tuple[float, object]:
    """The seconds `run()` takes, the device's queue drained before and after (no wait in between),
    and its result."""
    sync(device)
    start = time.perf_counter()
    out = run()
    sync(device)
    return time.perf_counter() - start, out


def best(measured: list[dict], value: Callable[[object], float] = float) -> dict[str, float]:
    """Each name's smallest value over the rounds."""
    return {name: min(value(m[name]) for m in measured) for name in measured[0]}


def ratios(measured: list[dict], pairs: Sequence[tuple[str, str]], value: Callable[[object], float] = float,
           **extra) -> list[dict]:
    """Per pair (a, b): each round's value(b) / value(a) (of seconds: x > 1, a is faster) and their
    median, the figure a noisy machine moves least."""
    out = []
    for a, b in pairs:
        per_round = [value(m[b]) / value(m[a]) for m in measured]
        out.append({"a": a, "b": b, **extra, "rounds": per_round, "median": statistics.median(per_round)})
    return out


def in_process(command: list[str], load: int = 0, env: dict | None = None) -> str:
    """`command` in a process of its own (beside `load` busy processes, killed as it ends): its
    stdout. A failure ends the benchmark with the command's stderr."""
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(load)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    if done.returncode:
        sys.exit(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def last_json(stdout: str) -> dict:
    """The JSON object a child process printed last."""
    return json.loads(stdout.strip().splitlines()[-1])


def emit(result: dict, text: str, json_path: Path | None) -> None:
    """Print `text` (the result as Markdown) and write `result` to `json_path` when given."""
    print(text)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=1) + "\n")
