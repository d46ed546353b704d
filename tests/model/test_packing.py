"""data.packed: sentences end to end with no padding give the padded path's outputs, loss and
gradients; the collator lays them out; torch's variable-length kernel is called as documented."""

import numpy as np
import pytest
import torch

from tests.helpers import make_model, ragged_batch
from transformer_mt.model import attention
from transformer_mt.packing import Packed, Varlen
from transformer_mt.training.loss import output_layer_loss

SRC, TGT = [5, 9, 1, 7, 3], [4, 2, 8, 1, 6]  # ragged, a sentence of one token on each side


def test_the_collator_packs_the_padded_batchs_tokens_in_order():
    padded, packed = ragged_batch(SRC, TGT), ragged_batch(SRC, TGT, packed=True)
    for key in ("src", "tgt_in", "tgt_out"):
        assert packed[key].dim() == 1 and packed[key].tolist() == padded[key][padded[key] != 0].tolist(), key
    src, tgt = packed["packing"].src, packed["packing"].tgt
    assert src.cu_seqlens.tolist() == [0, 5, 14, 15, 22, 25] and src.cu_seqlens.dtype == torch.int32
    assert tgt.cu_seqlens.tolist() == np.concatenate([[0], np.cumsum(np.array(TGT) + 1)]).tolist()
    assert (src.max_length, tgt.max_length) == (9, 9) and isinstance(src.max_length, int)
    assert tgt.positions.tolist()[:7] == [0, 1, 2, 3, 4, 0, 1] and tgt.segments.tolist()[:7] == [0] * 5 + [1] * 2
    assert packed["tgt_in"][tgt.cu_seqlens[:-1].long()].eq(1).all()  # each target starts with BOS
    assert packed["tgt_out"][tgt.cu_seqlens[1:].long() - 1].eq(2).all()  # and ends with EOS
    assert packed["num_tokens"] == padded["num_tokens"] == sum(SRC) + sum(TGT) + len(TGT)
    assert packed["id"].tolist() == padded["id"].tolist()


def test_a_packed_stream_unpacks_and_packs_back():
    layout = Packed.from_lengths(np.array([3, 1, 4]))
    x = torch.arange(8.0)[:, None]
    padded = layout.unpack(x)
    assert padded.shape == (3, 4, 1) and padded[1, 1:].eq(0).all() and padded[2, :, 0].tolist() == [4, 5, 6, 7]
    assert torch.equal(layout.pack(padded), x)


def losses_and_grads(model, batch: dict) -> tuple[torch.Tensor, torch.Tensor, dict]:
    model.zero_grad()
    states = model.features(batch["src"], batch["tgt_in"], batch.get("packing"))
    out = model.output_proj
    loss, nll, count = output_layer_loss(states, out.weight, out.bias, batch["tgt_out"], 0.1, 0)
    (loss * 2.0).backward()
    real = states if "packing" in batch else states[batch["tgt_out"] != 0]
    return torch.stack([loss, nll, count]).detach(), real.detach(), {
        name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("tie", ["all", "none"], ids=["tied", "untied+bias"])
@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rotary"])
def test_packed_states_loss_and_gradients_equal_the_padded_paths(norm_first, tie, positional):
    model = make_model(dropout=0.0, norm_first=norm_first, tie_embeddings=tie, output_bias=tie == "none",
                       positional=positional).train()
    expected = losses_and_grads(model, ragged_batch(SRC, TGT, seed=3))
    got = losses_and_grads(model, ragged_batch(SRC, TGT, seed=3, packed=True))
    torch.testing.assert_close(got[0], expected[0], atol=1e-5, rtol=1e-6)  # loss, nll, token count
    torch.testing.assert_close(got[1], expected[1], atol=1e-5, rtol=1e-5)  # the decoder states of real tokens
    assert got[2].keys() == expected[2].keys()
    for name in got[2]:
        torch.testing.assert_close(got[2][name], expected[2][name], atol=1e-5, rtol=1e-4, msg=name)


def varlen_by_definition(q, k, v, cu_seq_q, cu_seq_k, max_q, max_k, window_size=(-1, -1)):
    """torch.nn.attention.varlen.varlen_attn as documented, one sequence at a time: window_size
    (-1, 0) is causal, (-1, -1) full."""
    out = torch.empty_like(q)
    for i in range(len(cu_seq_q) - 1):
        rows, keys = slice(cu_seq_q[i], cu_seq_q[i + 1]), slice(cu_seq_k[i], cu_seq_k[i + 1])
        assert cu_seq_q[i + 1] - cu_seq_q[i] <= max_q and cu_seq_k[i + 1] - cu_seq_k[i] <= max_k
        out[rows] = torch.nn.functional.scaled_dot_product_attention(
            q[rows].transpose(0, 1), k[keys].transpose(0, 1), v[keys].transpose(0, 1),
            is_causal=window_size == (-1, 0)).transpose(0, 1)
    return out


def test_on_a_gpu_packed_attention_calls_torchs_varlen_kernel_with_the_layout(monkeypatch):
    """Where the kernel runs (CUDA, bf16 / fp16, no attention dropout) the model calls it with each
    layout's cumulative lengths and longest sequence, causal for decoder self-attention: a CPU
    stand-in computing varlen_attn's documented semantics gives the padded path's states."""
    model = make_model(dropout=0.0).train()
    padded, packed = ragged_batch(SRC, TGT, seed=5), ragged_batch(SRC, TGT, seed=5, packed=True)
    calls = []

    def stand_in(q, k, v, cu_q, cu_k, max_q, max_k, window_size):
        calls.append((cu_q.tolist(), cu_k.tolist(), max_q, max_k, window_size))
        return varlen_by_definition(q, k, v, cu_q.tolist(), cu_k.tolist(), max_q, max_k, window_size)

    monkeypatch.setattr(attention, "varlen_attn", stand_in)
    monkeypatch.setattr(attention, "uses_varlen_kernel", lambda q, dropout: dropout == 0.0)
    states = model.features(packed["src"], packed["tgt_in"], packed["packing"])
    expected = model.features(padded["src"], padded["tgt_in"])[padded["tgt_out"] != 0]
    torch.testing.assert_close(states, expected, atol=1e-5, rtol=1e-5)
    src, tgt = packed["packing"].src, packed["packing"].tgt
    encoder = (src.cu_seqlens.tolist(), src.cu_seqlens.tolist(), 9, 9, (-1, -1))
    decoder_self = (tgt.cu_seqlens.tolist(), tgt.cu_seqlens.tolist(), 9, 9, (-1, 0))
    cross = (tgt.cu_seqlens.tolist(), src.cu_seqlens.tolist(), 9, 9, (-1, -1))
    assert calls == [encoder] * 2 + [decoder_self, cross] * 2  # 2 + 2 layers


def test_varlen_attn_is_called_only_where_its_signature_is_the_one_packed_attention_passes():
    """torch 2.10's varlen_attn took is_causal=; the causal window_size=(-1, 0) came after its branch."""
    from torch.nn.attention.varlen import varlen_attn

    def later(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
              window_size=(-1, -1)):
        pass

    def of_2_10(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, is_causal=False):
        pass

    assert attention.takes_window_size(later) and attention.takes_window_size(varlen_attn)  # torch 2.13's
    assert not attention.takes_window_size(of_2_10) and not attention.takes_window_size(None)
    assert attention.varlen_attn is varlen_attn


@pytest.mark.parametrize("causal", [False, True])
def test_the_tests_cpu_kernel_for_the_varlen_op_is_the_reference_path_with_its_gradients(causal):
    """tests/varlen_cpu.py (which lets the compile tests run the GPU's packed path on a CPU) computes
    what reference_attention computes, forward and backward, through torch's own varlen_attn."""
    from tests import varlen_cpu  # noqa: F401

    torch.manual_seed(0)
    queries = Packed.from_lengths(np.array([3, 5, 1, 4]))
    keys = queries if causal else Packed.from_lengths(np.array([4, 1, 6, 2]))
    q = torch.randn(13, 2, 8, requires_grad=True)
    k, v = (torch.randn(keys.segments.numel(), 2, 8, requires_grad=True) for _ in range(2))
    expected = attention.reference_attention(q, k, v, Varlen(queries, keys), causal, 0.0)
    grad = torch.randn_like(expected)
    got = attention.varlen_attn(q, k, v, queries.cu_seqlens, keys.cu_seqlens, queries.max_length, keys.max_length,
                                window_size=(-1, 0) if causal else (-1, -1))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    for a, b in zip(torch.autograd.grad(got, (q, k, v), grad), torch.autograd.grad(expected, (q, k, v), grad)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_the_varlen_kernel_is_used_only_where_it_applies():
    q = torch.zeros(4, 2, 8)
    assert not attention.uses_varlen_kernel(q, 0.0)  # a CPU: the exact reference
    assert not attention.uses_varlen_kernel(q.bfloat16(), 0.0)
    layout = Packed.from_lengths(np.array([2, 2]))
    out = attention.packed_attention(q, q, q, Varlen(layout, layout), causal=False, dropout=0.0)
    assert out.shape == q.shape


def test_attention_maps_refuse_packed_streams():
    from transformer_mt.model.maps import attention_maps

    model = make_model()
    packed = ragged_batch(SRC, TGT, packed=True)
    with pytest.raises(ValueError, match="attention_maps records padded batches"), attention_maps(model):
        model.features(packed["src"], packed["tgt_in"], packed["packing"])


def test_the_layout_travels_with_the_batch(monkeypatch):
    """Lightning's transfer reaches the layout's tensors (the meta device stands in for a GPU), and
    pinning (the DataLoader calls a batch element's pin_memory) pins every one of them."""
    from lightning.fabric.utilities.apply_func import move_data_to_device

    batch = ragged_batch(SRC, TGT, packed=True)
    moved = move_data_to_device(batch, torch.device("meta"))["packing"]
    for layout in (moved.src, moved.tgt):
        assert {t.device.type for t in (layout.cu_seqlens, layout.positions, layout.segments)} == {"meta"}
    assert moved.src.max_length == batch["packing"].src.max_length == 9
    pinned = []  # a CPU-only torch cannot pin: record the calls instead
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned.append(self) or self.clone())
    copy = batch["packing"].pin_memory()
    assert len(pinned) == 6 and copy.tgt.max_length == 9
    assert torch.equal(copy.tgt.positions, batch["packing"].tgt.positions)
