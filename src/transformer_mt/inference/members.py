"""Loading checkpoints for decoding, without a LightningModule: each member's Transformer (in eval
mode, on the CPU) and the vocabularies the members share; `load_translator` makes a Translator of
them with a search the caller built (a task from its `decoding` config)."""

from pathlib import Path

import torch

from transformer_mt.checkpoints.files import is_hub_folder
from transformer_mt.checkpoints.loading import model_weights, read_checkpoint
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.decoding.strategy import Search
from transformer_mt.errors import DataError
from transformer_mt.inference.shortlist_loading import load_shortlist
from transformer_mt.inference.translator import Translator
from transformer_mt.interop.hub_folder import hub_checkpoint
from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.model.kernels import for_cpu


def build_transformer(tokenizer: Vocabularies, model: dict, weights: dict[str, torch.Tensor] | None = None
                      ) -> Transformer:
    """The Transformer of `model`'s keys for these vocabularies (their sizes and pad id), with
    `weights` loaded if given."""
    net = Transformer(TransformerConfig(src_vocab_size=tokenizer.src.vocab_size,
                                        tgt_vocab_size=tokenizer.tgt.vocab_size,
                                        pad_id=tokenizer.special_ids()["pad_id"], **model))
    if weights is not None:
        net.load_state_dict(weights)
    return net


def checkpoint_vocabularies(checkpoint: dict, path: Path, key: str = "ckpt_path") -> Vocabularies:
    """A checkpoint's vocabularies (one without: a ConfigError naming `key`)."""
    tokenizer = checkpoint["hyper_parameters"].get("tokenizer")
    if tokenizer is None:
        raise DataError(f"{key}={path}: the checkpoint has no tokenizer")
    return Vocabularies.from_dict(tokenizer)


def shared_vocabularies(paths: list[Path], checkpoints: list[dict]) -> Vocabularies:
    """The vocabularies every checkpoint of an ensemble has; members with others: one line naming both."""
    first = checkpoint_vocabularies(checkpoints[0], paths[0])
    for path, checkpoint in zip(paths[1:], checkpoints[1:]):
        if checkpoint_vocabularies(checkpoint, path).to_dict() != first.to_dict():
            raise DataError(f"ckpt_path: {paths[0]} and {path} have different tokenizers; the members of an "
                              "ensemble must share one")
    return first


def read_model(path: Path, key: str = "ckpt_path") -> dict:
    """A checkpoint of ours (read_checkpoint), or a Hugging Face folder read as one
    (interop/hub_folder.py: M2M-100, NLLB-200, Marian); errors name `key`."""
    return hub_checkpoint(path, key) if is_hub_folder(path) else read_checkpoint(path, key)


def load_members(paths: list[Path]) -> tuple[list[Transformer], Vocabularies, dict]:
    """The Transformers of `paths` (several: an ensemble's members, sharing their vocabularies), in
    eval mode, the vocabularies, and the first checkpoint's hyper-parameters."""
    checkpoints = [read_model(path) for path in paths]
    vocabularies = shared_vocabularies(paths, checkpoints)
    models = [build_transformer(vocabularies, c["hyper_parameters"]["model"], model_weights(c)).eval()
              for c in checkpoints]
    return models, vocabularies, checkpoints[0]["hyper_parameters"]


def load_translator(paths: list[Path], search: Search | None, quantize: str = "none", shortlist: bool | None = None,
                    kernels: str | None = None) -> Translator:
    """The Translator of the checkpoints at `paths` (several: an ensemble) with `search` (None: one
    that only scores) and the int8 rule `quantize`, on the CPU; with `shortlist` (None: the search's
    decoding.shortlist) the lexical table beside the first checkpoint restricts every batch
    (inference/shortlist_loading.py); `kernels`: the key's mode (model/kernels.py; None: torch's paths)."""
    models, vocabularies, _ = load_members(paths)
    wanted = (search is not None and search.shortlist) if shortlist is None else shortlist
    table = load_shortlist(paths[0], vocabularies) if wanted else None
    return Translator(models, vocabularies, search, quantize, table, None if kernels is None else for_cpu(kernels))
