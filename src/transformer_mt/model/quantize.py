"""int8 dynamic quantization of a model's linear layers, for decoding on the CPU."""

import warnings

import torch
from torch import nn

from transformer_mt.choices import QUANTIZE
from transformer_mt.errors import ConfigError
from transformer_mt.validate import check, listing, one_of


def check_quantize(value: str) -> str:
    """`value` if it names a supported quantization, else one line naming the key."""
    check("quantize", value, one_of(*QUANTIZE), listing(QUANTIZE))
    return value


def quantize_int8(model: nn.Module) -> nn.Module:
    """A copy of `model` (in eval mode) whose nn.Linear layers, the output layer included, hold
    int8 weights and quantize their inputs per call: torch's dynamic quantization (int8 matrix
    products, fp32 in and out). Embeddings, LayerNorms and attention stay fp32; `model` is
    untouched (a tied output layer gets its own int8 copy of the embedding). CPU only."""
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ConfigError("quantize=int8 runs on the CPU only; use quantize=none on a GPU")
    with warnings.catch_warnings():  # torch.ao.quantization is deprecated for torchao, and still works
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8).eval()


class Int8Copy:
    """The int8 copy of `model` that quantize=int8 decodes with, made when first asked for.
    Not an nn.Module, so whoever holds it gets no submodule: the copy is neither trained nor saved.
    `forget()` after the weights change; the next `get()` quantizes them again."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.copy: nn.Module | None = None

    def get(self) -> nn.Module:
        if self.copy is None:
            self.copy = quantize_int8(self.model)
        return self.copy

    def forget(self) -> None:
        self.copy = None
