"""int8 quantization of a model's linear layers, for decoding on the CPU.

Each linear layer of the int8 copy holds int8 weights with a scale per output row (per channel) and
quantizes its input with a scale per input row, as CTranslate2 does: a row (a token of a sentence)
is scaled by its own largest magnitude, so its result never depends on the other rows of the batch
and a sentence translates the same in any batch. The int8 products are torch's dynamic quantized
Linear (fbgemm / oneDNN): it takes one range for the whole input, so each row is first divided by
its own largest magnitude and one fixed anchor row (-1 and 1; 0 and 1 after a ReLU) is added, which
makes that range the same, [-1, 1] (or [0, 1]), for every batch; the int32 sums are exact, and the
row's scale multiplies the output back.
"""

import copy
import threading
import warnings
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

from transformer_mt.errors import ConfigError
from transformer_mt.model.kernels import Kernels, onednn_linear, quantized_engine
from transformer_mt.model.layers import FeedForward
from transformer_mt.model.output_rows import restricted_int8


class RowScaledInt8Linear(nn.Module):
    """A linear layer with int8 weights (a scale per output row) whose input is quantized per row (a
    scale per input row): `int8`, torch's dynamic quantized Linear of the weight (no bias), `bias`
    (fp32, or None) and `anchor`, the row that fixes the input range (`from_linear` makes all three).
    fp32 in and out."""

    def __init__(self, int8: DynamicInt8Linear, bias: torch.Tensor | None, anchor: torch.Tensor) -> None:
        super().__init__()
        self.int8 = int8
        self.register_buffer("bias", bias)
        self.register_buffer("anchor", anchor)
        self.in_features, self.out_features = int8.in_features, int8.out_features

    @classmethod
    def from_linear(cls, linear: nn.Linear, nonnegative: bool = False) -> "RowScaledInt8Linear":
        """`linear` quantized; `nonnegative`: its inputs are never below 0 (after a ReLU), so the int8
        levels cover [0, 1] of each row's range instead of [-1, 1]."""
        if linear.in_features < 2:
            raise ValueError("a row-scaled int8 linear layer needs at least 2 input features")
        weight_only = nn.Linear(linear.in_features, linear.out_features, bias=False)
        weight_only.weight = nn.Parameter(linear.weight.detach().clone(), requires_grad=False)
        weight_only.qconfig = torch.ao.quantization.per_channel_dynamic_qconfig
        with warnings.catch_warnings():  # torch.ao.quantization is deprecated for torchao, and still works
            warnings.simplefilter("ignore")
            int8 = DynamicInt8Linear.from_float(weight_only)
        anchor = torch.zeros(1, linear.in_features)
        anchor[0, 0], anchor[0, 1] = (0.0 if nonnegative else -1.0), 1.0
        return cls(int8, None if linear.bias is None else linear.bias.detach().clone(), anchor)

    def restricted(self, rows: torch.Tensor) -> "RowScaledInt8Linear":
        """This layer's output rows `rows` only (a vocabulary shortlist's output layer): the same
        int8 rows and scales, so its outputs are those columns of the whole layer's, bit for bit."""
        bias = None if self.bias is None else self.bias.index_select(0, rows)
        return RowScaledInt8Linear(restricted_int8(self.int8, rows), bias, self.anchor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        scale = rows.abs().amax(dim=1, keepdim=True).clamp_(min=1e-30)
        out = self.int8(torch.cat([rows / scale, self.anchor]))[:-1]  # the anchor's row dropped
        out = out.mul_(scale) if self.bias is None else torch.addcmul(self.bias, out, scale)
        return out.view(*x.shape[:-1], self.out_features)


def int8_layer(linear: nn.Linear, path: str = "torch", nonnegative: bool = False) -> nn.Module:
    """`linear` in int8, its weights packed for `path` (kernels.py: torch's quantized engine, or oneDNN's),
    or itself (path fp32: where int8 is slower at its shape)."""
    if path == "fp32":
        return linear
    if path == "onednn":
        with quantized_engine("onednn"):
            return RowScaledInt8Linear.from_linear(linear, nonnegative)
    return RowScaledInt8Linear.from_linear(linear, nonnegative)


def fp32_layer(linear: nn.Linear, path: str = "torch") -> nn.Module:
    """`linear` itself (torch's path) or on oneDNN's (kernels.py)."""
    return onednn_linear(linear) if path == "onednn" else linear


def quantize_int8(model: nn.Module, kernels: Kernels | None = None) -> nn.Module:
    """A copy of `model` (in eval mode) whose nn.Linear layers, the output layer included, are
    RowScaledInt8Linear (an FFN's second layer after a ReLU takes nonnegative inputs), each on the
    kernels `kernels` chose for its shape (None: torch's; kernels=auto keeps a layer fp32 where int8
    is slower at its shape on this CPU). Embeddings, LayerNorms and attention stay fp32; `model` is
    untouched (a tied output layer gets its own int8 copy of the embedding). CPU only."""
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ConfigError("quantize=int8 runs on the CPU only; use quantize=none on a GPU")
    copied = copy.deepcopy(model).eval()
    for parent, name, linear in linear_layers(copied):
        relu_input = isinstance(parent, FeedForward) and name == "linear2" and parent.activation is F.relu
        path = "torch" if kernels is None else kernels.choice("int8", linear,
                                                              partial(int8_layer, nonnegative=relu_input))
        setattr(parent, name, int8_layer(linear, path, relu_input))
    return copied


def on_kernels(model: nn.Module, kernels: Kernels) -> nn.Module:
    """`model` with each linear layer on the fp32 kernels `kernels` chose for its shape: a copy (in
    eval mode) where some layer goes to oneDNN, else `model` itself. CPU only: elsewhere `model`."""
    if any(p.device.type != "cpu" for p in model.parameters()):
        return model
    paths = {id(linear): kernels.choice("fp32", linear, fp32_layer) for _, _, linear in linear_layers(model)}
    if all(path == "torch" for path in paths.values()):
        return model
    copied = copy.deepcopy(model).eval()
    for (parent, name, linear), path in zip(linear_layers(copied), paths.values()):
        setattr(parent, name, fp32_layer(linear, path))
    return copied


def linear_layers(model: nn.Module) -> list[tuple[nn.Module, str, nn.Linear]]:
    """(parent, name, layer) of every nn.Linear of `model`, in module order."""
    return [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
            if type(child) is nn.Linear]


class DecodingCopies:
    """The copies of `model` that decode (not nn.Modules, so whoever holds them gets no submodule:
    they are neither trained nor saved), each made when first asked for: `int8()` (quantize=int8)
    and `fp32()` (the model on its chosen kernels, or the model itself), on `kernels` (None: torch's
    paths). `forget()` after the weights change; the next call copies them again. Decoders in
    several threads (inference/workers.py) asking at once get one copy, made once."""

    def __init__(self, model: nn.Module, kernels: Kernels | None = None) -> None:
        self.model, self.kernels = model, kernels
        self.copies: dict[str, nn.Module] = {}
        self.lock = threading.Lock()

    def int8(self) -> nn.Module:
        with self.lock:
            if "int8" not in self.copies:
                self.copies["int8"] = quantize_int8(self.model, self.kernels)
            return self.copies["int8"]

    def fp32(self) -> nn.Module:
        if self.kernels is None:
            return self.model
        with self.lock:
            if "fp32" not in self.copies:
                self.copies["fp32"] = on_kernels(self.model, self.kernels)
            return self.copies["fp32"]

    def forget(self) -> None:
        with self.lock:
            self.copies.clear()

    def __getstate__(self) -> dict:
        """Copied or pickled (a module's deep copy: EMA's average) as the model and the kernels: the
        copies are made again when asked for, and the lock is a new one."""
        return {"model": self.model, "kernels": self.kernels}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["model"], state["kernels"])
