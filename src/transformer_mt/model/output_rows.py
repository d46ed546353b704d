"""An output layer restricted to some rows of the vocabulary (a vocabulary shortlist): a smaller
product whose columns equal those columns of the whole layer's.

- nn.Linear (fp32; a tied layer's weight is the embedding): its weight's rows and bias entries
  `rows`, copied once per batch (an index_select), then one product of C instead of V rows; equal
  to the whole product's columns up to the last bits (a product of another size is blocked, and
  summed, in another order);
- torch's dynamically quantized Linear (quantize=int8): a quantized Linear of the same int8 rows
  and scales (per tensor or per row): its int32 sums, and so its outputs, are the whole one's
  columns bit for bit;
- any layer with a `restricted(rows)` method of its own: what that gives."""

import warnings
from typing import Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

from transformer_mt.errors import ConfigError


@runtime_checkable
class Restrictable(Protocol):
    """A layer with a restricted form of its own (the int8 copy's, oneDNN's: model/quantize.py, kernels.py)."""

    def restricted(self, rows: torch.Tensor) -> nn.Module:
        """The layer in_features -> len(rows), column j output row rows[j]."""


class Rows(nn.Module):
    """A linear layer of given rows: `weight` (C, D) and `bias` (C,) or None, made without the
    random initialization of an nn.Linear (which costs more than the copy, per batch)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.weight, self.bias = weight, bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


def restricted_output(layer: nn.Module, rows: torch.Tensor) -> nn.Module:
    """`layer` (in_features -> V) as a layer in_features -> len(rows), column j output row rows[j]."""
    if isinstance(layer, DynamicInt8Linear):
        return restricted_int8(layer, rows)
    if isinstance(layer, nn.Linear):
        with torch.no_grad():
            bias = None if layer.bias is None else layer.bias.index_select(0, rows)
            return Rows(layer.weight.index_select(0, rows), bias)
    if isinstance(layer, Restrictable):
        return layer.restricted(rows)
    raise ConfigError(f"decoding.shortlist=true: the output layer is a {type(layer).__name__}, which has no "
                      "restricted form; use decoding.shortlist=false")


def restricted_int8(layer: DynamicInt8Linear, rows: torch.Tensor) -> DynamicInt8Linear:
    """A dynamically quantized Linear of `layer`'s int8 rows `rows` and their scales."""
    weight, bias = layer.weight(), layer.bias()
    index = rows.cpu()
    if weight.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        kept = weight.index_select(0, index)
    else:  # one scale per row: quantized again with the rows' own scales, the same int8 values
        axis = weight.q_per_channel_axis()
        with warnings.catch_warnings():  # quantized tensor creation is deprecated for torchao, and still works
            warnings.simplefilter("ignore")
            kept = torch.quantize_per_channel(weight.dequantize().index_select(0, index),
                                              weight.q_per_channel_scales().index_select(0, index),
                                              weight.q_per_channel_zero_points().index_select(0, index), axis,
                                              weight.dtype)
    sub = DynamicInt8Linear(layer.in_features, rows.numel(), bias_=bias is not None, dtype=weight.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sub.set_weight_bias(kept, None if bias is None else bias.index_select(0, index))
    return sub
