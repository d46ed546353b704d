"""Which kernel runs each kind of attention: a diagnostic of the speed benchmarks (attention_speed.py,
loop_speed.py), not part of the model. Imported by its siblings (their folder on sys.path) and by
tests/benchmarks.

`attention_calls` runs the model once on a batch and keeps, for each kind of attention (encoder
self-attention, decoder self-attention, cross-attention), the arguments its first layer passes to
`F.scaled_dot_product_attention`. `attention_backends` replays each call as attention makes it
(`attention.sdpa`: on a GPU, within its backends) and names the backend torch dispatched it to
(the aten op it ran): flash, efficient, cudnn or math.
"""

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from unittest import mock

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from transformer_mt.model.attention import MultiHeadAttention, sdpa

KINDS = ("encoder_self", "decoder_self", "cross")
# aten op names (substrings) of the SDPA backends, checked in this order
BACKEND_OPS = (("flash", "flash"), ("efficient", "efficient"), ("cudnn", "cudnn"), ("overrideable", "overrideable"),
               ("attention_math", "math"))


@dataclass
class SdpaCall:
    """The arguments of one F.scaled_dot_product_attention call."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    attn_mask: torch.Tensor | None
    dropout_p: float
    is_causal: bool

    def describe(self) -> dict:
        """Shapes, dtype and masking, as plain data."""
        return {"q": list(self.q.shape), "k": list(self.k.shape), "dtype": str(self.q.dtype).removeprefix("torch."),
                "mask": None if self.attn_mask is None else list(self.attn_mask.shape),
                "is_causal": self.is_causal, "dropout_p": self.dropout_p}


def kind_of(name: str, module: MultiHeadAttention) -> str:
    if module.cross:
        return "cross"
    return "encoder_self" if name.startswith("encoder") else "decoder_self"


@contextlib.contextmanager
def capture(model: torch.nn.Module) -> Iterator[dict[str, SdpaCall]]:
    """Within the block, the first SDPA call of each attention kind of `model` is recorded (the
    calls still run). F.scaled_dot_product_attention is patched only inside the block."""
    calls: dict[str, SdpaCall] = {}
    current: list[str] = []
    real = F.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
        if current and current[-1] not in calls:
            calls[current[-1]] = SdpaCall(q, k, v, attn_mask, dropout_p, is_causal)
        return real(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, **kwargs)

    def leave(*_) -> None:  # a forward hook's return value would replace the module's output
        current.pop()

    handles = []
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            kind = kind_of(name, module)
            handles.append(module.register_forward_pre_hook(lambda *_, kind=kind: current.append(kind)))
            handles.append(module.register_forward_hook(leave))
    try:
        with mock.patch.object(F, "scaled_dot_product_attention", recording):
            yield calls
    finally:
        for handle in handles:
            handle.remove()


def attention_calls(model: torch.nn.Module, src: torch.Tensor, tgt_in: torch.Tensor,
                    dtype: torch.dtype | None = None) -> dict[str, SdpaCall]:
    """The SDPA arguments of each attention kind on this batch, as training passes them (the
    model's current mode, gradients on; under autocast to `dtype` if given)."""
    with capture(model) as calls, torch.autocast(src.device.type, dtype=dtype, enabled=dtype is not None):
        model.features(src, tgt_in)
    return calls


class OpNames(TorchDispatchMode):
    """The names of the aten ops run inside the block (below autograd: the kernels chosen)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.name())
        return func(*args, **(kwargs or {}))


def backend_of(call: SdpaCall) -> str:
    """The SDPA backend torch dispatches this call to (from the name of the aten op it runs)."""
    with OpNames() as ops:
        sdpa(call.q, call.k, call.v, call.attn_mask, call.dropout_p, call.is_causal)
    for marker, backend in BACKEND_OPS:
        if any("scaled_dot_product" in name and marker in name for name in ops.names):
            return backend
    return "math"  # the math path runs as plain matrix products, with no op of its own


def attention_backends(model: torch.nn.Module, src: torch.Tensor, tgt_in: torch.Tensor,
                       dtype: torch.dtype | None = None) -> dict[str, str]:
    """For each attention kind (encoder_self, decoder_self, cross) on this batch: the SDPA backend
    torch uses, "flash", "efficient", "cudnn" or "math"."""
    return {kind: backend_of(call) for kind, call in attention_calls(model, src, tgt_in, dtype).items()}
