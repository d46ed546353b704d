"""transformer_mt.model.sdpa_backends (the benchmarks' and docs/gpus.md's diagnostic): what each kind
of attention passes to SDPA, and which kernel runs it."""

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from tests.helpers import make_model, padded_batch
from transformer_mt.model import attention, sdpa_backends

KINDS = ["encoder_self", "decoder_self", "cross"]


def test_every_attention_kind_is_run_by_a_named_backend_and_f_is_restored():
    model, (src, tgt) = make_model().train(), padded_batch()
    original = F.scaled_dot_product_attention
    report = sdpa_backends.attention_backends(model, src, tgt)
    assert F.scaled_dot_product_attention is original
    # on a CPU, torch runs every one of these with its flash kernel (boolean masks included)
    assert report == {"encoder_self": "flash", "decoder_self": "flash", "cross": "flash"}
    with sdpa_kernel([SDPBackend.MATH]):  # the report follows what torch is allowed to use
        assert sdpa_backends.attention_backends(model, src, tgt) == dict.fromkeys(report, "math")


def test_encoder_and_cross_attention_pass_the_source_padding_mask():
    model, (src, tgt) = make_model().train(), padded_batch()
    calls = {kind: call.describe() for kind, call in sdpa_backends.attention_calls(model, src, tgt).items()}
    assert calls["encoder_self"]["mask"] == [4, 1, 1, 9] and calls["encoder_self"]["is_causal"] is False
    assert calls["cross"]["mask"] == [4, 1, 1, 9] and calls["cross"]["is_causal"] is False
    assert calls["cross"]["q"] == [4, 4, 6, 8] and calls["cross"]["k"] == [4, 4, 9, 8]
    assert calls["encoder_self"]["dtype"] == "float32"


def test_decoder_self_attention_is_causal_with_no_mask_on_padded_targets():
    model, (src, tgt) = make_model().train(), padded_batch()
    call = sdpa_backends.attention_calls(model, src, tgt)["decoder_self"]
    assert call.attn_mask is None and call.is_causal is True


def test_the_report_names_the_kernel_that_runs_within_attentions_gpu_rule(monkeypatch):
    """On CUDA attention runs within CUDA_BACKENDS (tests/model/test_attention_kernels.py); the
    report replays each call within the same rule, here applied to the CPU."""
    monkeypatch.setattr(attention, "backends_for", lambda device: [SDPBackend.MATH])
    model, (src, tgt) = make_model().eval(), padded_batch()
    assert sdpa_backends.attention_backends(model, src, tgt) == dict.fromkeys(KINDS, "math")
