"""Attention's beam layout is explicit and checked; layers return the attention module's weights."""

import pytest
import torch

from tests.helpers import make_model
from transformer_mt.model.attention import MultiHeadAttention
from transformer_mt.model.layers import DecoderLayer, EncoderLayer

LAYER_ARGS = dict(d_model=32, heads=4, d_k=8, d_ff=64, dropout=0.1, attention_dropout=0.1, activation_dropout=0.1,
                  activation="relu")


def cross_attention() -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(32, 4, 8, dropout=0.0, cross=True).eval()


@pytest.mark.parametrize(("queries", "memories", "beams"), [(6, 3, 1), (6, 3, 3), (5, 3, 1), (3, 6, 1), (6, 3, 0)])
def test_cross_attention_rejects_a_query_batch_that_is_not_beams_x_the_memory_batch(queries, memories, beams):
    """6 query rows for 3 memory rows with beams=1 divides evenly, yet is wrong: it must not run."""
    with pytest.raises(ValueError) as err:
        cross_attention()(torch.randn(queries, 2, 32), memory=torch.randn(memories, 5, 32), beams=beams)
    message = str(err.value)
    assert f"{queries} query rows" in message and f"{memories} memory rows" in message and f"beams={beams}" in message


def test_cross_attention_checks_the_layout_against_cached_memory_too():
    attn, cache = cross_attention(), {}
    attn(torch.randn(6, 1, 32), memory=torch.randn(3, 5, 32), cache=cache, beams=2)
    assert cache["k"].size(0) == 3
    with pytest.raises(ValueError, match="6 query rows for 3 memory rows with beams=1"):
        attn(torch.randn(6, 1, 32), memory=None, cache=cache)


def test_self_attention_takes_no_beams():
    attn = MultiHeadAttention(32, 4, 8, dropout=0.0).eval()
    with pytest.raises(ValueError, match="beams=2"):
        attn(torch.randn(6, 2, 32), beams=2)


@torch.no_grad()
def test_beams_attend_the_shared_memory_row_as_a_copied_memory_would():
    attn, x, memory = cross_attention(), torch.randn(6, 4, 32), torch.randn(3, 5, 32)
    shared, shared_w = attn(x, memory=memory, need_weights=True, beams=2)
    copied, copied_w = attn(x, memory=memory.repeat_interleave(2, dim=0), need_weights=True)
    torch.testing.assert_close(shared, copied, atol=1e-6, rtol=0)
    assert shared_w.shape == copied_w.shape == (6, 4, 4, 5)
    torch.testing.assert_close(shared_w, copied_w, atol=1e-6, rtol=0)


@torch.no_grad()
def test_decode_needs_the_beams_of_its_layout():
    model = make_model()
    src, tgt = torch.randint(4, 50, (3, 8)), torch.randint(4, 50, (6, 4))
    memory = model.encode(src)
    with pytest.raises(ValueError, match="6 query rows for 3 memory rows with beams=1"):
        model.decode(tgt, memory, src)  # beams of 2 that divide evenly: no longer inferred from the shapes
    with pytest.raises(ValueError, match="beams=3"):
        model.decode(tgt, memory, src, beams=3)
    cache = model.init_cache()
    model.decode(tgt[:, :1], memory, src, cache=cache, beams=2)
    with pytest.raises(ValueError, match="beams=1"):
        model.decode(tgt[:, 1:2], memory, src, cache=cache)
    assert model.decode(tgt, memory, src, beams=2).shape == (6, 4, 50)


def padded(rows: int, length: int, real: list[int]) -> torch.Tensor:
    """A (rows, 1, 1, length) key mask, row i True on its first real[i] positions."""
    return (torch.arange(length)[None, :] < torch.tensor(real)[:, None])[:, None, None, :]


@pytest.mark.parametrize("norm_first", [False, True])
@torch.no_grad()
def test_encoder_layer_returns_its_attention_modules_weights(norm_first):
    torch.manual_seed(0)
    layer = EncoderLayer(**LAYER_ARGS, norm_first=norm_first).eval()
    x, mask = torch.randn(2, 6, 32), padded(2, 6, [6, 4])
    out, weights = layer(x, mask, need_weights=True)
    _, expected = layer.self_attn(layer.attn_block.sublayer_input(x), mask=mask, need_weights=True)
    assert torch.equal(weights, expected)
    assert torch.all(weights[1, ..., 4:] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 6))
    without, none = layer(x, mask)
    assert none is None
    torch.testing.assert_close(without, out, atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("beams", [1, 2])
@torch.no_grad()
def test_decoder_layer_returns_its_attention_modules_weights(norm_first, beams):
    torch.manual_seed(0)
    layer = DecoderLayer(**LAYER_ARGS, norm_first=norm_first).eval()
    x, memory, memory_mask = torch.randn(2 * beams, 3, 32), torch.randn(2, 5, 32), padded(2, 5, [5, 2])
    out, weights = layer(x, memory, None, memory_mask, need_weights=True, beams=beams)
    self_out, self_w = layer.self_attn(layer.self_block.sublayer_input(x), is_causal=True, need_weights=True)
    h = layer.self_block.combine(x, self_out)
    _, cross_w = layer.cross_attn(layer.cross_block.sublayer_input(h), memory=memory, mask=memory_mask,
                                  need_weights=True, beams=beams)
    assert torch.equal(weights["self"], self_w) and torch.equal(weights["cross"], cross_w)
    assert torch.all(weights["self"].triu(1) == 0)
    assert torch.all(weights["cross"][beams:, ..., 2:] == 0)  # the second sentence's beams: 2 real source tokens
    for w in weights.values():
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
    without, none = layer(x, memory, None, memory_mask, beams=beams)
    assert none == {"self": None, "cross": None}
    torch.testing.assert_close(without, out, atol=1e-5, rtol=0)


@torch.no_grad()
def test_model_attention_weights_are_the_layers_and_encode_decode_return_tensors():
    model = make_model()
    src, tgt = torch.tensor([[5, 6, 7, 2, 0, 0]]), torch.tensor([[1, 8, 9]])
    weights = model.attention_weights(src, tgt)
    x = model.embed_dropout(model.src_pos(model.src_embed(src)))
    _, first = model.encoder_layers[0](x, model.padding_mask(src), need_weights=True)
    assert torch.equal(weights["encoder"][0], first)
    assert [len(weights[k]) for k in ("encoder", "decoder_self", "cross")] == [2, 2, 2]
    memory = model.encode(src)
    assert isinstance(memory, torch.Tensor) and isinstance(model.decode(tgt, memory, src), torch.Tensor)
    torch.testing.assert_close(model.features(src, tgt), model.decoder_states(tgt, memory, src))


def test_parameter_names_are_unchanged():
    """Checkpoints and the Marian / CTranslate2 converters rely on these names."""
    names = set(make_model().state_dict())
    for block in ("attn_block", "ffn_block"):
        assert {f"encoder_layers.0.{block}.norm.weight", f"encoder_layers.0.{block}.norm.bias"} <= names
    for block in ("self_block", "cross_block", "ffn_block"):
        assert {f"decoder_layers.1.{block}.norm.weight", f"decoder_layers.1.{block}.norm.bias"} <= names
    assert {"decoder_layers.0.cross_attn.q_proj.weight", "decoder_layers.0.cross_attn.kv_proj.weight",
            "encoder_layers.1.self_attn.qkv_proj.weight", "decoder_layers.1.self_attn.out_proj.bias"} <= names
