"""A Hugging Face model folder (Marian / OPUS-MT, M2M-100, NLLB-200: config.json, the weights and
the tokenizer's files, as the hub serves them) read as our model: `model.init_from=DIR` fine-tunes
it (tasks/runs/init_from.py), and `ckpt_path=DIR` decodes it as it would a checkpoint of ours
(task=translate, evaluate, score, serve: inference/members.py's read_model), built in memory in
the layout checkpoints/loading.py's `read_checkpoint` gives."""

import json
from pathlib import Path

import torch

from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.errors import DataError

READS = ("marian", "m2m_100")  # the model_type values read


def read_hub_folder(path: Path, key: str) -> tuple[dict, dict[str, torch.Tensor], Vocabularies]:
    """(our model keys, our state_dict, our Vocabularies) of the folder; a model_type we do not read:
    a DataError naming `key` and config.json's field."""
    model_type = json.loads((path / "config.json").read_text(encoding="utf-8")).get("model_type")
    if model_type == "m2m_100":
        from transformer_mt.interop.m2m100 import read_m2m100

        return read_m2m100(path, key)
    if model_type == "marian":
        from transformer_mt.interop.marian import read_marian

        return read_marian(path, key)
    raise DataError(f"{key}={path}: config.json's model_type is {model_type!r}; transformer-mt reads "
                    f"{' and '.join(READS)} folders")


def hub_checkpoint(path: Path, key: str) -> dict:
    """The folder as a checkpoint of ours: its weights under the module's `model.` prefix, its
    architecture and vocabularies as hyper-parameters, no training state, no data record and no
    decoding of its own (the command's `decoding` decodes it)."""
    architecture, state, vocabularies = read_hub_folder(path, key)
    hyper = {"model": architecture, "tokenizer": vocabularies.to_dict(), "optimizer": {}, "decoding": None,
             "data": None}
    return {"state_dict": {f"model.{name}": tensor for name, tensor in state.items()}, "hyper_parameters": hyper}
