"""Write the shipped Multi30k model: a run's averaged checkpoint with nothing of the machine it
was trained on.

    python experiments/multi30k/ship.py outputs/train/<run>/checkpoints/average.ckpt \
        experiments/multi30k/multi30k_en_de.ckpt [--outputs FOLDER]

Keeps what task=translate, task=evaluate and task=export read (the weights, the hyper-parameters
with the tokenizer, the step); the averaged epoch checkpoints are named by file name only, and the
corpus folder recorded for task=evaluate becomes `${oc.env:DATA_DIR,data}/multi30k` (resolved
where it is used, as conf/paths does). A distilled student (task=distill) also records its training
corpora (the teacher's translations, in its pipeline's folder) and the teacher's tokenizer file:
the corpora's folders under `--outputs FOLDER` (this machine's folder of run folders) are written
as under `outputs/`, as the README's commands name them, and the tokenizer file is dropped (the
tokenizer is inside the checkpoint). Any other absolute path left stops the script in one line.
"""

import argparse
import sys
from pathlib import Path

import torch

from transformer_mt.atomic import atomic_file

CORPUS = "${oc.env:DATA_DIR,data}/multi30k"


def portable(data: dict, outputs: Path | None) -> None:
    """The recorded data config with this machine's paths replaced (in place); exit 1 on one left."""
    config = data["config"]
    if "corpus" in config:  # a record from before data.corpora named every corpus: its corpus first, as `main`
        config["corpora"] = {"main": config.pop("corpus"), **(config.get("corpora") or {})}
    first, *others = config["corpora"]
    config["corpora"][first]["data_dir"] = CORPUS
    config["tokenizer"]["file"] = None
    for name in others:
        corpus = config["corpora"][name]
        folder = Path(corpus["data_dir"])
        if outputs is not None and folder.is_relative_to(outputs.resolve()):
            corpus["data_dir"] = str(Path("outputs") / folder.relative_to(outputs.resolve()))
        elif folder.is_absolute():
            sys.exit(f"error: data.corpora.{name}.data_dir={folder} is a path of this machine: give --outputs "
                     "the folder of run folders it is under")
    for key in ("run_dir", "cache_dir"):
        config.pop(key, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("average", type=Path, help="a run's checkpoints/average.ckpt")
    parser.add_argument("output", type=Path)
    parser.add_argument("--outputs", type=Path, help="the folder of run folders a student's corpora are under")
    args = parser.parse_args()
    checkpoint = torch.load(args.average, map_location="cpu", weights_only=True)
    checkpoint["averaged_from"] = [Path(p).name for p in checkpoint.get("averaged_from", [])]
    data = checkpoint["hyper_parameters"].get("data")
    if data is not None:
        portable(data, args.outputs)
    with atomic_file(args.output) as tmp, open(tmp, "wb") as f:
        torch.save(checkpoint, f)
    print(f"{args.output}: {args.output.stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
