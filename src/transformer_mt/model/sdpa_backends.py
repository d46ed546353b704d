"""Which kernel runs each kind of attention (a diagnostic: docs/gpus.md, "Checking the attention
kernels"; the speed benchmarks print it beside their figures).

`attention_calls` runs the model once on a batch and keeps, for each kind of attention (encoder
self-attention, decoder self-attention, cross-attention), the arguments its first layer passes to
`F.scaled_dot_product_attention`. `attention_backends` replays each call as attention makes it
(`attention.sdpa`: on a GPU, within its backends) and names the backend torch dispatched it to
(the aten op it ran): flash, efficient, cudnn or math.
"""

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode  # torch's documented way to see the aten ops run

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
    """The kind of attention of `module`, named `name` in its model."""
    if module.cross:
        return "cross"
    return "encoder_self" if name.startswith("encoder") else "decoder_self"


class _FirstCalls(TorchFunctionMode):
    """Records the first SDPA call made while each kind of attention runs (the calls still run)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, SdpaCall] = {}
        self.current: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention and self.current and self.current[-1] not in self.calls:
            named = dict(zip(("q", "k", "v", "attn_mask", "dropout_p", "is_causal"), args)) | kwargs
            self.calls[self.current[-1]] = SdpaCall(named["q"], named["k"], named["v"], named.get("attn_mask"),
                                                    named.get("dropout_p", 0.0), named.get("is_causal", False))
        return func(*args, **kwargs)


@contextmanager
def capture(model: torch.nn.Module) -> Iterator[dict[str, SdpaCall]]:
    """Within the block, the first SDPA call of each attention kind of `model` is recorded."""
    mode = _FirstCalls()

    def leave(*_) -> None:  # a forward hook's return value would replace the module's output
        mode.current.pop()

    with ExitStack() as stack:
        for name, module in model.named_modules():
            if isinstance(module, MultiHeadAttention):
                kind = kind_of(name, module)
                stack.callback(module.register_forward_pre_hook(lambda *_, k=kind: mode.current.append(k)).remove)
                stack.callback(module.register_forward_hook(leave).remove)
        with mode:
            yield mode.calls


def attention_calls(model: torch.nn.Module, src: torch.Tensor, tgt_in: torch.Tensor,
                    dtype: torch.dtype | None = None) -> dict[str, SdpaCall]:
    """The SDPA arguments of each attention kind on this batch, as training passes them (the
    model's current mode, gradients on; under autocast to `dtype` if given)."""
    with capture(model) as calls, torch.autocast(src.device.type, dtype=dtype, enabled=dtype is not None):
        model.features(src, tgt_in)
    return calls


class _OpNames(TorchDispatchMode):
    """The names of the aten ops run inside the block (below autograd: the kernels chosen)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.name())
        return func(*args, **(kwargs or {}))


def backend_of(call: SdpaCall) -> str:
    """The SDPA backend torch dispatches this call to (from the name of the aten op it runs)."""
    with _OpNames() as ops:
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
