"""Attention's kernel rule: on a GPU, SDPA runs within CUDA_BACKENDS (no cuDNN), in eager mode and
inside a compiled graph. (Which kernel each kind of attention gets: transformer_mt/model/sdpa_backends.py,
tested in tests/benchmarks.)"""

import torch
from torch.nn.attention import SDPBackend

from tests.helpers import make_model, padded_batch
from transformer_mt.model import attention


def test_on_a_gpu_attention_leaves_out_cudnn_and_the_outputs_follow(monkeypatch):
    """cuDNN's SDPA plans each new shape (518 ms a base step on an H200 against 68 ms without): on
    CUDA attention runs within CUDA_BACKENDS. A CPU has no cuDNN kernel, so the rule is checked
    by applying it to the CPU: the outputs match the unrestricted ones (math against flash: to float
    error)."""
    assert attention.backends_for(torch.device("cuda", 0)) == [
        SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    assert attention.backends_for(torch.device("cpu")) is None
    model, (src, tgt) = make_model().eval(), padded_batch()
    with torch.no_grad():
        free = model.features(src, tgt)
    entered = []
    real = attention.sdpa_kernel

    def recording(backends):
        entered.append(list(backends))
        return real(backends)

    monkeypatch.setattr(attention, "sdpa_kernel", recording)
    monkeypatch.setattr(attention, "backends_for", lambda device: [SDPBackend.MATH])
    with torch.no_grad():
        limited = model.features(src, tgt)
    assert entered and all(b == [SDPBackend.MATH] for b in entered)
    assert torch.allclose(limited, free, atol=1e-5)


def test_the_gpu_rule_compiles_into_one_graph(monkeypatch):
    """module.compile compiles the model with fullgraph=True: on a GPU that graph holds attention's
    sdpa_kernel block, which must not break it (checked by applying the rule to the CPU)."""
    monkeypatch.setattr(attention, "backends_for", lambda device: [SDPBackend.MATH])
    torch._dynamo.reset()
    model, (src, tgt) = make_model().eval(), padded_batch()
    with torch.no_grad():
        eager = model.features(src, tgt)
        compiled = torch.compile(model.features, fullgraph=True, backend="eager")(src, tgt)
    assert torch.equal(compiled, eager)
