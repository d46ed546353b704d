"""Attention's beam layout is explicit (the cache, a search's decode state, says it) and checked;
attention_maps records what each attention module computes."""

import pytest
import torch

from tests.helpers import make_model
from transformer_mt.model.attention import MultiHeadAttention
from transformer_mt.model.cache import CrossAttentionCache, LayerCache
from transformer_mt.model.layers import DecoderLayer, EncoderLayer
from transformer_mt.model.maps import attention_maps

LAYER_ARGS = dict(d_model=32, heads=4, d_k=8, d_ff=64, dropout=0.1, attention_dropout=0.1, activation_dropout=0.1,
                  activation="relu")


def cross_attention() -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(32, 4, 8, dropout=0.0, cross=True).eval()


@pytest.mark.parametrize(("queries", "memories", "beams"), [(6, 3, 1), (6, 3, 3), (5, 3, 1), (3, 6, 1), (6, 3, 0)])
def test_cross_attention_rejects_a_query_batch_that_is_not_beams_x_the_memory_batch(queries, memories, beams):
    """6 query rows for 3 memory rows with beams=1 divides evenly, yet is wrong: it must not run."""
    with pytest.raises(ValueError) as err:
        cross_attention()(torch.randn(queries, 2, 32), memory=torch.randn(memories, 5, 32),
                          cache=CrossAttentionCache(beams, store=False))
    message = str(err.value)
    assert f"{queries} query rows" in message and f"{memories} memory rows" in message and f"beams={beams}" in message


def test_cross_attention_checks_the_layout_against_cached_memory_too():
    attn, cache = cross_attention(), CrossAttentionCache(beams=2)
    attn(torch.randn(6, 1, 32), memory=torch.randn(3, 5, 32), cache=cache)
    assert cache.keys.size(0) == 3
    cache.beams = 1
    with pytest.raises(ValueError, match="6 query rows for 3 memory rows with beams=1"):
        attn(torch.randn(6, 1, 32), memory=None, cache=cache)


@torch.no_grad()
def test_beams_attend_the_shared_memory_row_as_a_copied_memory_would():
    attn, x, memory = cross_attention(), torch.randn(6, 4, 32), torch.randn(3, 5, 32)
    with attention_maps(attn) as maps:
        shared = attn(x, memory=memory, cache=CrossAttentionCache(beams=2, store=False))
        copied = attn(x, memory=memory.repeat_interleave(2, dim=0))
    shared_w, copied_w = maps.cross
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
        model.decode(tgt, memory, src, cache=model.init_cache(beams=3, store=False))
    cache = model.init_cache(beams=2)
    model.decode(tgt[:, :1], memory, src, cache=cache)
    with pytest.raises(ValueError, match="beams=1"):
        model.decode(tgt[:, 1:2], memory, src, cache=model.init_cache())
    assert model.decode(tgt, memory, src, cache=model.init_cache(beams=2, store=False)).shape == (6, 4, 50)


def padded(rows: int, length: int, real: list[int]) -> torch.Tensor:
    """A (rows, 1, 1, length) key mask, row i True on its first real[i] positions."""
    return (torch.arange(length)[None, :] < torch.tensor(real)[:, None])[:, None, None, :]


@pytest.mark.parametrize("norm_first", [False, True])
@torch.no_grad()
def test_an_encoder_layer_records_its_attention_module_and_recording_changes_no_output(norm_first):
    torch.manual_seed(0)
    layer = EncoderLayer(**LAYER_ARGS, norm_first=norm_first).eval()
    x, mask = torch.randn(2, 6, 32), padded(2, 6, [6, 4])
    with attention_maps(layer) as maps:
        out = layer(x, mask)
    h = layer.attn_block.norm(x) if norm_first else x
    with attention_maps(layer.self_attn) as expected:
        layer.self_attn(h, mask=mask)
    assert len(maps.encoder) == 1 and torch.equal(maps.encoder[0], expected.encoder[0])
    weights = maps.encoder[0]
    assert torch.all(weights[1, ..., 4:] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 6))
    assert isinstance(out, torch.Tensor) and layer.self_attn.maps is None  # the block left nothing behind
    torch.testing.assert_close(layer(x, mask), out, atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("beams", [1, 2])
@torch.no_grad()
def test_a_decoder_layer_records_both_attention_modules(norm_first, beams):
    torch.manual_seed(0)
    layer = DecoderLayer(**LAYER_ARGS, norm_first=norm_first).eval()
    x, memory, memory_mask = torch.randn(2 * beams, 3, 32), torch.randn(2, 5, 32), padded(2, 5, [5, 2])
    state = LayerCache(None, CrossAttentionCache(beams, store=False))  # the layout only: nothing kept
    with attention_maps(layer) as maps:
        out = layer(x, memory, memory_mask, cache=state)
    with attention_maps(layer) as expected:  # the layer's two attention modules, called by hand
        h = layer.self_block(x, lambda y: layer.self_attn(y, is_causal=True))
        layer.cross_block(h, lambda y: layer.cross_attn(y, memory, memory_mask, cache=state.cross_attn))
    assert torch.equal(maps.decoder_self[0], expected.decoder_self[0])
    assert torch.equal(maps.cross[0], expected.cross[0])
    assert torch.all(maps.decoder_self[0].triu(1) == 0)
    assert torch.all(maps.cross[0][beams:, ..., 2:] == 0)  # the second sentence's beams: 2 real source tokens
    for w in (maps.decoder_self[0], maps.cross[0]):
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
    torch.testing.assert_close(layer(x, memory, memory_mask, cache=state), out, atol=1e-5, rtol=0)


@torch.no_grad()
def test_a_models_attention_maps_are_its_layers_and_encode_decode_return_tensors():
    model = make_model()
    src, tgt = torch.tensor([[5, 6, 7, 2, 0, 0]]), torch.tensor([[1, 8, 9]])
    with attention_maps(model) as maps:
        logits = model(src, tgt)
    x = model.embed_dropout(model.src_pos(model.src_embed(src)))
    with attention_maps(model.encoder_layers[0]) as first:
        model.encoder_layers[0](x, model.padding_mask(src))
    assert torch.equal(maps.encoder[0], first.encoder[0])
    assert [len(m) for m in (maps.encoder, maps.decoder_self, maps.cross)] == [2, 2, 2]
    memory = model.encode(src)
    assert isinstance(memory, torch.Tensor)
    torch.testing.assert_close(model.decode(tgt, memory, src), logits)  # recorded: computed as SDPA computes it
    torch.testing.assert_close(model.output_proj(model.features(src, tgt)), logits)


def test_parameter_names_are_unchanged():
    """Checkpoints and the Marian / CTranslate2 converters rely on these names."""
    names = set(make_model().state_dict())
    for block in ("attn_block", "ffn_block"):
        assert {f"encoder_layers.0.{block}.norm.weight", f"encoder_layers.0.{block}.norm.bias"} <= names
    for block in ("self_block", "cross_block", "ffn_block"):
        assert {f"decoder_layers.1.{block}.norm.weight", f"decoder_layers.1.{block}.norm.bias"} <= names
    assert {"decoder_layers.0.cross_attn.q_proj.weight", "decoder_layers.0.cross_attn.kv_proj.weight",
            "encoder_layers.1.self_attn.qkv_proj.weight", "decoder_layers.1.self_attn.out_proj.bias"} <= names
