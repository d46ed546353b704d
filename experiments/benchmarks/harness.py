"""The benchmarks' one harness: systems in rounds, each in turn first (two alternate), in this process or each in
a fresh one (alone, or beside busy processes); best times, medians of per-round ratios; the machine described
once; Markdown and JSON; made-up data. Only the standard library at import (an older src may run it)."""

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"  # the shipped Multi30k model
PAD, BOS, EOS = 0, 1, 2  # the special ids of our vocabularies (transformer_mt.data.tokenizer)
WORDS = "a man woman dog child in the on with red blue street park ball plays runs sits looks at big small".split()


def parser(doc: str, device: str | None = None, with_json: bool = True) -> argparse.ArgumentParser:
    """A script's parser: its docstring as the help, --json, and --device (default `device`) if given."""
    out = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if with_json:
        out.add_argument("--json", type=Path, help="write every figure here as JSON")
    if device is not None:
        out.add_argument("--device", default=device, choices=["cpu", "cuda"])
    return out


def machine(device: str = "cpu") -> dict:
    """The machine: the device, the CPU (model, vector extensions), its cores, torch's version and threads."""
    import torch

    from transformer_mt.model.kernels import cpu

    gpu = device.startswith("cuda")
    return {"device_name": torch.cuda.get_device_name(device) if gpu else "CPU", "cpu": cpu(),
            "cores": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads()}


def described(figures: dict) -> str:
    cpu = figures["cpu"]
    gpu = "" if figures["device_name"] == "CPU" else f"{figures['device_name']}; "
    return (f"{gpu}{cpu['model']} ({', '.join(cpu['flags']) or 'no AVX2'}), {figures['cores']} cores, "
            f"torch {figures['torch']}, {figures['threads']} threads")


def order(names: Sequence, round_: int) -> list:
    """The order of round `round_`: rotated by one each round, so each name goes first in turn."""
    k = round_ % len(names)
    return [*names[k:], *names[:k]]


def rounds(runs: dict[str, Callable[[], object]], count: int, label: str | None = None) -> list[dict]:
    """Each of `runs` once a round in `order`, `count` rounds: the results by name (`label`: progress)."""
    measured = []
    for r in range(count):
        measured.append({name: runs[name]() for name in order(list(runs), r)})
        if label:
            print(f"[{label}] round {r + 1} of {count} done", file=sys.stderr, flush=True)
    return measured


def sync(device) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def timed(run: Callable[[], object], device="cpu") -> tuple[float, object]:
    """The seconds `run()` takes (the device's queue drained before and after), and its result."""
    sync(device)
    start = time.perf_counter()
    out = run()
    sync(device)
    return time.perf_counter() - start, out


def best(measured: list[dict], key: Callable[[object], float] | None = None) -> dict:
    """Each name's smallest result over the rounds (by `key`: of a result of `timed`, its seconds)."""
    return {name: min((m[name] for m in measured), key=key) for name in measured[0]}


def ratios(measured: list[dict], pairs: Sequence[tuple[str, str]], value: Callable[[object], float] = float,
           **extra) -> list[dict]:
    """Per pair (a, b): each round's value(b) / value(a) and their median (x > 1 of seconds: a is faster)."""
    per_pair = {(a, b): [value(m[b]) / value(m[a]) for m in measured] for a, b in pairs}
    return [{"a": a, "b": b, **extra, "rounds": r, "median": statistics.median(r)} for (a, b), r in per_pair.items()]


def in_process(command: list[str], load: int = 0, env: dict | None = None) -> str:
    """`command`'s stdout, run beside `load` busy processes; a failure ends the benchmark with its stderr."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    if done.returncode:
        sys.exit(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def save(result: dict, json_path: Path | None, text: str | None = None) -> None:
    """`text` printed (if any), and `result` written to `json_path` as JSON (if given)."""
    if text is not None:
        print(text)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=1) + "\n")


def sentences(count: int, fewest: int, most: int, seed: int = 0) -> list[str]:
    """`count` made-up English sentences of `fewest` to `most` words and a full stop."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(fewest, most))) + " ." for _ in range(count)]


def synthetic_pairs(n: int, vocab: int, min_len: int = 2, target: tuple[float, float] = (0.05, 0.2)):
    """n random pairs as the datamodule's Arrow table: source lengths lognormal (median 25, at least `min_len`, EOS
    last), the target's the source's times a lognormal factor (its log's mean and sigma: `target`), at most 250."""
    import datasets
    import numpy as np
    import pyarrow as pa

    from transformer_mt.data.encoding import TRAIN_FEATURES

    rng = np.random.default_rng(0)
    src_len = np.clip(np.rint(rng.lognormal(math.log(25), 0.6, n)), min_len, 250).astype(np.int32)
    tgt_len = np.clip(np.rint(src_len * rng.lognormal(*target, n)), 1, 249).astype(np.int32)

    def lists(lengths, ids):
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids.astype(np.int32)))

    src_ids = rng.integers(4, vocab, int(src_len.sum()))
    src_ids[np.cumsum(src_len) - 1] = EOS  # each source ends in EOS
    tgt_ids = rng.integers(4, vocab, int(tgt_len.sum()))
    columns = {"src_ids": lists(src_len, src_ids), "tgt_ids": lists(tgt_len, tgt_ids),
               "src_len": pa.array(src_len), "tgt_len": pa.array(tgt_len)}
    return datasets.Dataset.from_dict(columns, features=TRAIN_FEATURES)
