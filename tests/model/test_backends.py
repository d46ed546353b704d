"""The SDPA backend report: what each kind of attention passes to SDPA, and which kernel runs it."""

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from tests.helpers import make_model, padded_sources
from transformer_mt.model import attention
from transformer_mt.model.backends import attention_backends, attention_calls


def padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Four padded source rows and four target rows of 6, 3, 5 and 1 tokens (BOS first), padded."""
    src = padded_sources()
    tgt = torch.randint(4, 50, (4, 6))
    tgt[:, 0] = 1
    for row, length in enumerate([6, 3, 5, 1]):
        tgt[row, length:] = 0
    return src, tgt


def test_every_attention_kind_is_run_by_a_named_backend_and_f_is_restored():
    model, (src, tgt) = make_model().train(), padded_batch()
    original = F.scaled_dot_product_attention
    report = attention_backends(model, src, tgt)
    assert F.scaled_dot_product_attention is original
    # on a CPU, torch runs every one of these with its flash kernel (boolean masks included)
    assert report == {"encoder_self": "flash", "decoder_self": "flash", "cross": "flash"}
    with sdpa_kernel([SDPBackend.MATH]):  # the report follows what torch is allowed to use
        assert attention_backends(model, src, tgt) == dict.fromkeys(report, "math")


def test_encoder_and_cross_attention_pass_the_source_padding_mask():
    model, (src, tgt) = make_model().train(), padded_batch()
    calls = {kind: call.describe() for kind, call in attention_calls(model, src, tgt).items()}
    assert calls["encoder_self"]["mask"] == [4, 1, 1, 9] and calls["encoder_self"]["is_causal"] is False
    assert calls["cross"]["mask"] == [4, 1, 1, 9] and calls["cross"]["is_causal"] is False
    assert calls["cross"]["q"] == [4, 4, 6, 8] and calls["cross"]["k"] == [4, 4, 9, 8]
    assert calls["encoder_self"]["dtype"] == "float32"


def test_decoder_self_attention_is_causal_with_no_mask_on_padded_targets():
    model, (src, tgt) = make_model().train(), padded_batch()
    call = attention_calls(model, src, tgt)["decoder_self"]
    assert call.attn_mask is None and call.is_causal is True


def test_on_a_gpu_attention_leaves_out_cudnn_and_the_report_and_outputs_follow(monkeypatch):
    """cuDNN's SDPA plans each new shape (518 ms a base step on an H200 against 68 ms without): on
    CUDA attention runs within CUDA_BACKENDS. A CPU has no cuDNN kernel, so the rule is checked
    by applying it to the CPU: the outputs match the unrestricted ones (math against flash: to float
    error), and the report names
    the kernel that ran within it."""
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
    assert attention_backends(model, src, tgt) == dict.fromkeys(["encoder_self", "decoder_self", "cross"], "math")


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
