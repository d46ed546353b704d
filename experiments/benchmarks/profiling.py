"""Where a step's time goes (train_speed.py --profile-steps): ops or their kernels in CATEGORIES. As a script,
EVENTS.json ({"events": [[[op, its parent, ...], kernel], ...], "intervals": [[start, end], ...]}) sorted."""

import contextlib
import functools
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import harness
from lightning.pytorch.callbacks import Callback
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from transformer_mt.markdown import markdown_table

CATEGORIES = ("matmul", "attention", "loss", "elementwise", "optimizer", "other", "idle")
MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::matmul",
              "aten::linear", "aten::_scaled_mm", "aten::mv", "aten::addmv", "aten::dot"}


def category(event, kernel: str = "") -> str:
    """An op's (or its kernel's) category: the innermost range or op that says, else the op itself."""
    if kernel.startswith(("Memcpy", "Memset")):
        return "other"
    node = event
    while node is not None:
        name = node.name.lower()
        if name == "loss" or "outputlayerloss" in name:
            return "loss"
        if "attention" in name or "attn" in name:
            return "attention"
        if name == "forward" or name.startswith("autograd::engine::evaluate_function"):
            break  # the forward or a backward op: not the optimizer's, whatever encloses it
        if name.startswith("optimizer."):
            return "optimizer"
        node = node.cpu_parent
    if event.name in MATMUL_OPS or any(marker in f"{event.name} {kernel}".lower() for marker in ("gemm", "triton_tem")):
        return "matmul"
    return "elementwise" if kernel or event.name.startswith(("aten::", "triton_")) else "other"


def busy_us(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def time_per_category(events, cuda: bool, wall_us: float) -> dict:
    """Microseconds per category: CUDA kernel time on a GPU, CPU op self time on a CPU; idle."""
    totals = dict.fromkeys(CATEGORIES, 0.0)
    if cuda:  # kernels, copies, memsets; not the device spans of record_function ranges (as torch's tables)
        device = [e for e in events if e.device_type == DeviceType.CUDA and not e.is_user_annotation]
        for event in events:
            if event.device_type == DeviceType.CPU:
                for kernel in event.kernels:
                    totals[category(event, kernel.name)] += kernel.duration
        attributed = sum(totals.values())
        totals["other"] += max(0.0, sum(e.time_range.elapsed_us() for e in device) - attributed)
        busy = busy_us([(e.time_range.start, e.time_range.end) for e in device])
    else:
        for event in events:
            if event.device_type == DeviceType.CPU and not event.is_user_annotation and not event.is_async:
                totals[category(event)] += event.self_cpu_time_total
        busy = sum(totals.values())
    totals["idle"] = max(0.0, wall_us - busy)
    return {"busy_us": busy, **totals}


def profile_ranges():
    """`loss` and `forward` ranges around the module's output_layer_loss and training_step (patched)."""
    from transformer_mt.training import module

    def ranged(name: str, fn):
        def run(*args, **kwargs):
            with record_function(name):
                return fn(*args, **kwargs)
        return run

    stack = contextlib.ExitStack()
    for owner, attribute, name in ((module, "output_layer_loss", "loss"),
                                   (module.TranslationModule, "training_step", "forward")):
        stack.enter_context(mock.patch.object(owner, attribute, ranged(name, getattr(owner, attribute))))
    return stack


def profile_callback(device, first: int, count: int, out: dict):
    """A callback: steps first .. first + count - 1 under torch.profiler, their categories into `out`."""
    cuda = device.type == "cuda"

    class ProfileSteps(Callback):
        profiler, started = None, 0.0

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            if trainer.global_step == first:
                self.profiler = profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])])
                self.profiler.start()
                harness.sync(device)
                self.started = time.perf_counter()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            if self.profiler is None or trainer.global_step != first + count:
                return
            harness.sync(device)
            wall_us = 1e6 * (time.perf_counter() - self.started)
            self.profiler.stop()
            totals = time_per_category(self.profiler.events(), cuda, wall_us)
            busy = totals.pop("busy_us")
            out.update({"steps": count, "basis": "CUDA kernel time" if cuda else "CPU op self time",
                        "wall_ms_per_step": wall_us / count / 1000, "busy_ms_per_step": busy / count / 1000,
                        "ms_per_step": {k: v / count / 1000 for k, v in totals.items()},
                        "share": {k: v / wall_us for k, v in totals.items()}})
            self.profiler = None

    return ProfileSteps()


def profile_markdown(profile: dict) -> str:
    steps = f"{profile['steps']} step" + ("s" if profile["steps"] != 1 else "")
    lines = [f"Profile of {steps} ({profile['basis']}): {profile['wall_ms_per_step']:.1f} ms a step, "
             f"{profile['busy_ms_per_step']:.1f} ms busy", ""]
    rows = [[k, f"{v:.2f}", f"{profile['share'][k]:.1%}"] for k, v in profile["ms_per_step"].items()]
    return "\n".join([*lines, markdown_table(["category", "ms per step", "share"], rows, right=(1, 2))])


def main(path: Path) -> None:
    given = json.loads(path.read_text())
    categories = [category(functools.reduce(lambda parent, name: SimpleNamespace(name=name, cpu_parent=parent),
                                            reversed(chain), None), kernel) for chain, kernel in given["events"]]
    busy = busy_us([tuple(i) for i in given["intervals"]])
    print(json.dumps({"categories": categories, "busy_us": busy, "order": list(CATEGORIES)}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
