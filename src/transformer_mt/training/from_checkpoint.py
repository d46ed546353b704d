"""A TranslationModule built from a checkpoint, or from an ensemble's (task=evaluate tests it with
Lightning's trainer, through the same code as validation). Decoding alone needs no module:
transformer_mt.inference."""

from pathlib import Path

from omegaconf import DictConfig

from transformer_mt.checkpoints.loading import model_weights
from transformer_mt.config import plain
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.inference.members import read_model, shared_vocabularies
from transformer_mt.inference.shortlist_loading import load_shortlist
from transformer_mt.model.kernels import for_cpu
from transformer_mt.training.module import TranslationModule


def load_module(path: Path | list[Path], decoding: dict | DictConfig | None = None, quantize: str | None = None,
                kernels: str | None = None) -> TranslationModule:
    """A ready TranslationModule (eval mode, on the CPU) built from a checkpoint, read with
    weights_only=True: its hyper-parameters, its weights as `initial_weights`; with `decoding`, it
    searches with that strategy instead of its own, with `quantize` (int8 | none) with that instead
    of its own. Checkpoints of earlier versions load too (checkpoints/upgrades.py). Several paths: an
    ensemble, the first checkpoint's module with the others as its `ensemble` (members must share
    their vocabularies: two that do not are one line naming both files). With decoding.shortlist, the
    lexical table beside the first checkpoint restricts its decoding (inference/shortlist_loading.py).
    `kernels`: the key's mode the decoding runs on (model/kernels.py; None: torch's paths)."""
    paths = path if isinstance(path, list) else [path]
    checkpoints = [read_model(p) for p in paths]
    shared_vocabularies(paths, checkpoints)
    arguments = module_arguments(checkpoints[0], decoding, quantize)
    shortlist = None
    if (arguments["decoding"] or {}).get("shortlist"):  # decoding.shortlist: the first checkpoint's table
        shortlist = load_shortlist(paths[0], Vocabularies.from_dict(arguments["tokenizer"]))
    return TranslationModule(**arguments, ensemble=[str(p) for p in paths[1:]] or None, shortlist=shortlist,
                             kernels=None if kernels is None else for_cpu(kernels)).eval()


def module_arguments(checkpoint: dict, decoding: dict | DictConfig | None = None, quantize: str | None = None) -> dict:
    """The TranslationModule arguments of a checkpoint (as read_checkpoint gives it)."""
    hparams = dict(checkpoint["hyper_parameters"])
    hparams["quantize"] = quantize or hparams.get("quantize") or "none"
    if decoding is not None:
        hparams["decoding"] = plain(decoding)
    hparams.pop("ensemble", None)
    return {**hparams, "initial_weights": model_weights(checkpoint)}
