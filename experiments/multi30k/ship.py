"""Write the shipped Multi30k model: a run's averaged checkpoint with nothing of the machine it
was trained on.

    python experiments/multi30k/ship.py outputs/train/<run>/checkpoints/average.ckpt \
        experiments/multi30k/multi30k_en_de.ckpt

Keeps what task=translate, task=evaluate and task=export read (the weights, the hyper-parameters
with the tokenizer, the step); the averaged epoch checkpoints are named by file name only, and the
corpus folder recorded for task=evaluate becomes `${oc.env:DATA_DIR,data}/multi30k` (resolved
where it is used, as conf/paths does).
"""

import argparse
from pathlib import Path

import torch

from transformer_mt.atomic import atomic_file

CORPUS = "${oc.env:DATA_DIR,data}/multi30k"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("average", type=Path, help="a run's checkpoints/average.ckpt")
    parser.add_argument("output", type=Path)
    args = parser.parse_args()
    checkpoint = torch.load(args.average, map_location="cpu", weights_only=True)
    checkpoint["averaged_from"] = [Path(p).name for p in checkpoint.get("averaged_from", [])]
    data = checkpoint["hyper_parameters"].get("data")
    if data is not None:
        data["config"]["corpus"]["data_dir"] = CORPUS
    with atomic_file(args.output) as tmp, open(tmp, "wb") as f:
        torch.save(checkpoint, f)
    print(f"{args.output}: {args.output.stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
