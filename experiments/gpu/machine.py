"""What the machine has, for experiments/gpu/run.py: the installed versions and the carried datasets
wheels that fit them, the environment probe (a script run in a step of its own), Multi30k (or
made-up sentences in its place) and the CUDA libraries of torch's packages. Only the standard library.

    python experiments/gpu/machine.py

prints what run.py reads of this machine (pyarrow's and huggingface_hub's versions, the datasets
wheels its install step takes, the LD_LIBRARY_PATH of its decode step) as JSON."""

import glob
import json
import os
import random
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ENVIRONMENT = """
import inspect, json, os, platform, torch
from importlib import metadata
from transformer_mt.model import attention
cuda = torch.cuda.is_available()
try:
    from torch.nn.attention.varlen import varlen_attn
    signature = str(inspect.signature(varlen_attn))
except ImportError:
    signature = None
try:
    triton = metadata.version("triton")
except metadata.PackageNotFoundError:
    triton = None
print(json.dumps({"torch": torch.__version__, "python": platform.python_version(), "cuda_available": cuda,
                  "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name() if cuda else None,
                  "capability": ".".join(map(str, torch.cuda.get_device_capability())) if cuda else None,
                  "gpu_memory_gb": torch.cuda.get_device_properties(0).total_memory / 2**30 if cuda else None,
                  "cpu_count": os.cpu_count(), "triton": triton, "varlen_attn_signature": signature,
                  "varlen_kernel_used": attention.varlen_attn is not None}))
"""


def version(package: str) -> tuple[int, int]:
    """An installed package's (major, minor); (0, 0) when it is not installed."""
    try:
        return tuple(int(x) for x in metadata.version(package).split(".")[:2])  # type: ignore[return-value]
    except (metadata.PackageNotFoundError, ValueError):
        return (0, 0)


def datasets_folder() -> str:
    """The folder of .gpu-wheels (experiments/gpu/wheels.sh fills three) with the datasets release this
    machine's pyarrow and huggingface_hub can run: 5.x needs pyarrow >= 24 and hub >= 1.31, 4.4
    pyarrow >= 21 and hub < 2, 4.0 pyarrow >= 15."""
    arrow, hub = version("pyarrow"), version("huggingface_hub")
    if arrow >= (24, 0) and hub >= (1, 31):
        return "datasets-5"
    return "datasets-4.4" if arrow >= (21, 0) and hub < (2, 0) else "datasets-4.0"


def smoke_multi30k(folder: Path) -> Path:
    """Made-up sentence pairs (the target: the source's words reversed, each capitalized) as a
    Multi30k folder (train, val, test2016 .en/.de): the data of --smoke."""
    rng = random.Random(0)
    words = "a the dog cat man woman child ball park street red blue big small runs plays sits looks".split()
    (folder / "multi30k").mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 300), ("val", 20), ("test2016", 20)):
        sources = [rng.choices(words, k=rng.randint(3, 12)) for _ in range(n)]
        (folder / "multi30k" / f"{split}.en").write_text("".join(" ".join(s) + "\n" for s in sources))
        (folder / "multi30k" / f"{split}.de").write_text(
            "".join(" ".join(w.capitalize() for w in reversed(s)) + "\n" for s in sources))
    return folder


def data_dir(smoke: bool, work: Path) -> Path | None:
    """Where Multi30k is: with --smoke made-up sentences (the same minute on any machine), else
    $DATA_DIR, else .gpu-data, else None."""
    if smoke:
        return smoke_multi30k(work / "smoke-data")
    for candidate in (os.environ.get("DATA_DIR"), str(ROOT / ".gpu-data")):
        if candidate and (Path(candidate) / "multi30k" / "train.en").is_file():
            return Path(candidate).resolve()
    return None


def cuda_libraries() -> dict:
    """LD_LIBRARY_PATH with the CUDA libraries that torch's pip packages bring (nvidia/*/lib in
    site-packages, or wherever on the import path they are): CTranslate2's wheel loads cuBLAS by
    name and does not look there."""
    found = (sorted(glob.glob(os.path.join(entry or ".", "nvidia", "*", "lib"))) for entry in sys.path)
    folders = dict.fromkeys(folder for each in found for folder in each)
    return {"LD_LIBRARY_PATH": os.pathsep.join([*folders, *filter(None, [os.environ.get("LD_LIBRARY_PATH")])])}


if __name__ == "__main__":
    print(json.dumps({"pyarrow": version("pyarrow"), "huggingface_hub": version("huggingface_hub"),
                      "datasets_folder": datasets_folder(), **cuda_libraries()}))
