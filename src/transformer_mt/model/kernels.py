"""The kernels a decoding copy's linear layers run, chosen per CPU (the key `kernels`).

Per layer shape and precision, the fastest path on this CPU: torch's default (fp32: MKL's sgemm;
int8: fbgemm, torch's x86 quantized engine) or oneDNN's (fp32: torch.utils.mkldnn's Linear, its
weight packed once; int8: oneDNN's quantized engine), as CTranslate2 picks a GEMM backend per CPU;
an int8 layer may also stay fp32, where int8 is slower at its shape. Each shape is timed once, at
ROWS input rows with the decoder's threads, and the choice kept in a JSON file of the cache folder
under a key naming the CPU (model, vector extensions, the capability torch computes with, the
oneDNN ISA cap, the threads), so later processes on the same kind of CPU read it. Another path
than torch's default is taken only where it is GAIN times faster: close timings keep torch's path,
so that noise does not flip choices between processes. kernels=default keeps torch's paths
everywhere (the same arithmetic on every machine of one ISA)."""

import json
import logging
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn
from torch.utils.mkldnn import MkldnnLinear

from transformer_mt.atomic import atomic_file
from transformer_mt.choices import KERNELS
from transformer_mt.model.output_rows import Rows
from transformer_mt.user_cache import user_cache

log = logging.getLogger(__name__)

ROWS = 64  # input rows a shape is timed at: a decoding step's (sentences leave the batch as they end)
GAIN = 1.15  # another path is taken where torch's default takes this many times its time
VERSION = 2  # of the rule: choices made by another are measured again
FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8")
# the paths of a layer: torch's default (fp32: MKL; int8: its quantized engine, x86: fbgemm) first, oneDNN's; an
# int8 layer may also stay fp32 where int8 is slower at its shape (small layers at a decoding step's rows: the int8
# kernel's per-call work, quantizing the rows and scaling them back, outweighs its smaller products)
PATHS = {"fp32": ("torch", "onednn"), "int8": ("torch", "onednn", "fp32")}


def cpu() -> dict:
    """This CPU: its model name with family and model numbers, and which of FLAGS it has (from
    /proc/cpuinfo; elsewhere the platform's processor)."""
    info = Path("/proc/cpuinfo").read_text(encoding="utf-8") if Path("/proc/cpuinfo").is_file() else ""
    fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in info.splitlines() if ":" in line)}
    flags = fields.get("flags", "").split()
    family = f" (family {fields['cpu family']}, model {fields['model']})" if "cpu family" in fields else ""
    name = fields.get("model name") or platform.processor() or platform.machine()
    return {"model": name + family, "flags": [f for f in FLAGS if f in flags]}


def cpu_key() -> str:
    """This CPU as the choices depend on it: its model and vector extensions, the capability torch
    computes with, oneDNN's ISA cap (ONEDNN_MAX_CPU_ISA), torch's version and threads."""
    machine = cpu()
    return " | ".join([machine["model"], ",".join(machine["flags"]) or "no AVX2",
                       torch.backends.cpu.get_cpu_capability(), os.environ.get("ONEDNN_MAX_CPU_ISA", "any ISA"),
                       f"torch {torch.__version__}", f"{torch.get_num_threads()} threads", f"rule {VERSION}"])


def default_cache() -> Path:
    """Where the choices are kept: $TRANSFORMER_MT_CACHE/kernels.json, else the user's cache folder
    ($XDG_CACHE_HOME or ~/.cache)/transformer_mt/kernels.json: they belong to the CPU, not to a run."""
    return user_cache() / "kernels.json"


@contextmanager
def quantized_engine(name: str) -> Iterator[None]:
    """torch's quantized engine `name` while int8 weights are packed (the packing keeps it)."""
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


class OnednnLinear(nn.Module):
    """An nn.Linear on oneDNN's fp32 path (torch.utils.mkldnn's Linear: its weight in oneDNN's layout,
    converted once), with the restricted form a vocabulary shortlist asks of an output layer."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.packed = MkldnnLinear(linear, torch.float32)
        self.dense: tuple[torch.Tensor, torch.Tensor] | None = None  # the weight and bias read back, once

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.packed(x)

    def restricted(self, rows: torch.Tensor) -> nn.Module:
        """The layer of rows `rows` on torch's path (model/output_rows.py): the rows of its fp32 weight
        and bias, read back from oneDNN's layout at the first call (a shortlist asks every batch)."""
        with torch.no_grad():
            if self.dense is None:
                self.dense = self.packed.weight.to_dense(), self.packed.bias.to_dense()
            weight, bias = self.dense
            return Rows(weight.index_select(0, rows), bias.index_select(0, rows))


def onednn_linear(linear: nn.Linear) -> nn.Module:
    """`linear` on oneDNN's fp32 path: its weight packed in oneDNN's layout once."""
    return OnednnLinear(linear)


def onednn_available(precision: str) -> bool:
    """Whether this torch has oneDNN's path for `precision` (fp32 | int8)."""
    if precision == "fp32":
        return torch.backends.mkldnn.is_available()
    return "onednn" in torch.backends.quantized.supported_engines


def seconds(layer: nn.Module, rows: torch.Tensor, calls: int = 5) -> float:
    """The median time of a call of `layer` on `rows` (after one warm-up call)."""
    with torch.no_grad():
        layer(rows)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            layer(rows)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def for_cpu(mode: str) -> "Kernels":
    """The kernels of the key `kernels` (auto | default), choices kept in `default_cache()`."""
    return Kernels(mode, default_cache())


class Kernels:
    """The path of each linear layer shape on this CPU (`choice`), measured once per shape and kept
    in `cache` (a JSON file; None: in this process only). mode: auto (measured) or default (torch's)."""

    def __init__(self, mode: str = "auto", cache: Path | None = None) -> None:
        """cache: the JSON file (None: none, the choices kept by this object only)."""
        if mode not in KERNELS:
            raise ValueError(f"kernels={mode!r}: one of {', '.join(KERNELS)}")
        self.mode, self.cache, self.key = mode, cache, cpu_key()
        self.chosen: dict[str, str] = {}
        self.measured = 0  # shapes timed in this process

    def choice(self, precision: str, linear: nn.Linear, build: Callable[[nn.Linear, str], nn.Module]) -> str:
        """The path of layers of `linear`'s shape in `precision` (fp32 | int8); build(linear, path)
        makes such a layer on a path, for timing."""
        if self.mode == "default":
            return "torch"
        name = f"{precision} {linear.in_features}x{linear.out_features}{' +bias' if linear.bias is not None else ''}"
        if name not in self.chosen:
            self.chosen[name] = self.stored().get(name) or self.measure(precision, linear, build, name)
        return self.chosen[name]

    def measure(self, precision: str, linear: nn.Linear, build: Callable[[nn.Linear, str], nn.Module],
                name: str) -> str:
        """Time each path of `precision` on `linear`'s shape; the fastest if it is GAIN times faster than
        torch's default path, else that one; stored."""
        rows = torch.randn(ROWS, linear.in_features, generator=torch.Generator().manual_seed(0))  # not torch's RNG
        paths = [p for p in PATHS[precision] if p != "onednn" or onednn_available(precision)]
        times = {path: seconds(build(linear, path), rows) for path in paths}
        fastest = min(times, key=times.get)
        path = fastest if times[fastest] * GAIN < times["torch"] else "torch"
        self.measured += 1
        self.store(name, path)
        return path

    def everything(self) -> dict:
        """The cache file's choices for every CPU (none where it is missing or unreadable)."""
        if self.cache is None or not self.cache.is_file():
            return {}
        try:
            kept = json.loads(self.cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return kept if isinstance(kept, dict) else {}

    def stored(self) -> dict[str, str]:
        """The choices kept for this CPU."""
        kept = self.everything().get(self.key)
        return kept if isinstance(kept, dict) else {}

    def store(self, name: str, path: str) -> None:
        """One choice added to the cache file, written whole or not at all (an unreadable one is
        written anew; one that cannot be written is only not kept)."""
        if self.cache is None:
            return
        everything = self.everything()
        everything[self.key] = {**self.stored(), name: path}
        try:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(self.cache) as tmp:
                tmp.write_text(json.dumps(everything, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        except OSError as err:
            log.warning("kernels: the choices are not kept (%s: %s)", self.cache, err)

    def describe(self) -> str:
        """The choices so far, in words, for the log."""
        if self.mode == "default":
            return "kernels=default: torch's paths"
        parts = []
        for precision in PATHS:
            paths = [path for name, path in self.chosen.items() if name.startswith(precision + " ")]
            if paths:
                counts = ", ".join(f"{paths.count(p)} on {p}" for p in sorted(set(paths)))
                parts.append(f"{precision} layer shapes: {counts}")
        origin = f"{self.measured} measured now" if self.measured else "as measured before"
        return f"kernels for {self.key.split(' | ')[0]}: {'; '.join(parts) or 'none yet'} ({origin})"
