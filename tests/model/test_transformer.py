"""Parameter counts, Table 3 switches, weight tying, the KV cache."""

import copy
import math

import pytest
import torch
from omegaconf import OmegaConf

from tests.helpers import make_model
from transformer_mt.errors import ConfigError
from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.schema.architecture import ModelGroup
from transformer_mt.schema.keys import check_keys


def count(**kwargs) -> int:
    with torch.device("meta"):
        return Transformer(TransformerConfig(**kwargs)).num_parameters()


def test_base_and_big_parameter_counts_match_the_paper():
    # base with a 37k joint vocabulary: 63.1M (the paper reports 65M); big: 213M
    base = count(src_vocab_size=37000, tgt_vocab_size=37000)
    assert base == pytest.approx(63.08e6, rel=1e-3)
    big = count(src_vocab_size=37000, tgt_vocab_size=37000, d_model=1024, d_ff=4096, heads=16, dropout=0.3)
    assert big == pytest.approx(214.2e6, rel=1e-3)


def test_weight_tying_modes():
    all_tied = make_model(tie_embeddings="all")
    assert all_tied.src_embed.weight is all_tied.tgt_embed.weight is all_tied.output_proj.weight
    dec = make_model(tie_embeddings="decoder")
    assert dec.tgt_embed.weight is dec.output_proj.weight and dec.src_embed.weight is not dec.tgt_embed.weight
    none = make_model(tie_embeddings="none")
    assert none.output_proj.weight is not none.tgt_embed.weight
    v, d = 50, 32
    assert dec.num_parameters() - all_tied.num_parameters() == v * d
    assert none.num_parameters() - dec.num_parameters() == v * d


def test_d_k_may_differ_from_d_model_over_heads():
    model = make_model(d_model=32, heads=4, d_k=16)  # Table 3 row B: h * d_k = 64 != d_model
    assert model.encoder_layers[0].self_attn.qkv_proj.weight.shape == (3 * 64, 32)
    assert model(torch.randint(4, 50, (2, 5)), torch.randint(4, 50, (2, 3))).shape == (2, 3, 50)


def test_pre_norm_learned_positions_and_gelu_run():
    model = make_model(norm_first=True, positional="learned", activation="gelu")
    assert isinstance(model.encoder_norm, torch.nn.LayerNorm)
    out = model(torch.randint(4, 50, (2, 5)), torch.randint(4, 50, (2, 3)))
    assert out.shape == (2, 3, 50) and torch.isfinite(out).all()


def test_embeddings_are_scaled_and_pad_row_is_zero():
    model = make_model(d_model=32)
    tokens = torch.tensor([[0, 7]])
    emb = model.src_embed(tokens)
    assert torch.all(emb[0, 0] == 0)
    torch.testing.assert_close(emb[0, 1], model.src_embed.weight[7] * 32**0.5)


def test_sinusoidal_table_matches_the_formula():
    model = make_model(d_model=32)
    table = model.src_pos.table
    pos, i = 5, 3
    angle = pos / 10000 ** (2 * i / 32)
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


@pytest.mark.parametrize("bad, message", [
    (dict(heads=5), "model.d_model=512 is not divisible by model.heads=5; set model.d_k"),
    (dict(tie_embeddings="both"), "model.tie_embeddings='both': must be all, decoder or none"),
    (dict(positional="alibi"), "model.positional='alibi': must be sinusoidal, learned, rotary, relative or fairseq"),
    (dict(activation="tanh"), "model.activation='tanh': must be relu, gelu or swish"),
    (dict(max_relative_positions=0), "model.max_relative_positions=0: must be an integer >= 1"),
    (dict(d_k=5, positional="rotary"), "model.d_k=5: must be even with model.positional=rotary"),
    (dict(dropout=1.0), "model.dropout=1.0: must be a number in [0, 1)"),
])
def test_bad_model_keys_are_refused_by_the_schema_in_one_line_naming_the_key(bad, message):
    with pytest.raises(ConfigError) as err:
        check_keys(OmegaConf.structured(ModelGroup(**bad)), "model.")
    assert str(err.value).startswith(message)


def test_a_tied_output_layer_needs_one_vocabulary():
    with pytest.raises(ConfigError, match="^model.tie_embeddings=all needs a joint vocabulary"):
        make_model(tgt_vocab_size=60)


def test_too_long_input_is_a_clear_error():
    model = make_model(max_positions=8)
    with pytest.raises(ConfigError, match="max_positions=8"):
        model(torch.randint(4, 50, (1, 9)), torch.randint(4, 50, (1, 3)))


@torch.no_grad()
@torch.no_grad()
@pytest.mark.parametrize("positional", ["sinusoidal", "rotary", "relative"])
def test_incremental_decoding_with_cache_equals_full_decoding(positional):
    """Also for positions inside self-attention (rotary, relative: the queries at their positions
    in the sequence)."""
    model = make_model(positional=positional, max_relative_positions=3)
    src = torch.randint(4, 50, (3, 8))
    src[1, 5:] = 0
    tgt = torch.randint(4, 50, (3, 6))
    full = model.decode(tgt, model.encode(src), src)
    memory, cache = model.encode(src), model.init_cache()
    steps = [model.decode(tgt[:, t : t + 1], memory, src, cache=cache) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    # reordering the cache reorders the next step's output
    index = torch.tensor([2, 0, 1])
    nxt = torch.randint(4, 50, (3, 1))
    b = model.decode(nxt, memory, src, cache=copy.deepcopy(cache))[index]
    cache.select(index, index)
    a = model.decode(nxt[index], memory[index], src[index], cache=cache)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@torch.no_grad()
def test_beams_share_one_memory_row_as_extra_queries():
    """decode with one memory row per sentence and r consecutive target rows per sentence (beam
    search's layout) gives what decoding against the memory copied r times gives."""
    model = make_model()
    src = torch.randint(4, 50, (3, 8))
    src[1, 5:] = 0
    tgt = torch.randint(4, 50, (6, 5))
    memory = model.encode(src)
    shared = model.decode(tgt, memory, src, cache=model.init_cache(beams=2, store=False))
    copied = model.decode(tgt, memory.repeat_interleave(2, dim=0), src.repeat_interleave(2, dim=0))
    torch.testing.assert_close(shared, copied, atol=1e-5, rtol=0)
    cache = model.init_cache(beams=2)
    steps = [model.decode(tgt[:, t : t + 1], memory, src, cache=cache) for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), copied, atol=1e-5, rtol=0)
    assert cache.layers[0].cross_attn.keys.size(0) == 3  # the memory's K, V were computed once per sentence


@torch.no_grad()
def test_the_self_attention_cache_is_allocated_once_and_written_in_place():
    """init_cache(capacity): each layer's K, V buffers are allocated at the first step for
    `capacity` positions and never again; the position offset is a Python int. Without a capacity
    (or with too small a one) they grow; the outputs are the same to the bit."""
    model = make_model()
    src = torch.randint(4, 50, (3, 8))
    tgt = torch.randint(4, 50, (3, 6))
    memory = model.encode(src)
    outputs = []
    for capacity in (6, 2, None):
        cache = model.init_cache(capacity)
        steps = [model.decode(tgt[:, :1], memory, src, cache=cache)]
        buffers = [(layer.self_attn.keys.data_ptr(), layer.self_attn.values.data_ptr()) for layer in cache.layers]
        steps += [model.decode(tgt[:, t : t + 1], memory, src, cache=cache) for t in range(1, 6)]
        assert cache.length == 6 and isinstance(cache.length, int)
        assert all(layer.self_attn.length == 6 for layer in cache.layers)
        if capacity == 6:
            assert [(layer.self_attn.keys.data_ptr(), layer.self_attn.values.data_ptr())
                    for layer in cache.layers] == buffers
            assert cache.layers[0].self_attn.keys.shape == (3, 6, 4, 8)  # (rows, capacity, heads, d_k)
        outputs.append(torch.cat(steps, dim=1))
    assert torch.equal(outputs[0], outputs[1]) and torch.equal(outputs[0], outputs[2])
    torch.testing.assert_close(outputs[0], model.decode(tgt, memory, src), atol=1e-5, rtol=0)


@torch.no_grad()
def test_select_gathers_the_filled_rows_into_the_caches_own_buffers():
    model = make_model()
    src = torch.randint(4, 50, (3, 8))
    tgt = torch.randint(4, 50, (3, 4))
    memory, cache = model.encode(src), model.init_cache(10)
    for t in range(3):
        model.decode(tgt[:, t : t + 1], memory, src, cache=cache)
    before = [(layer.self_attn.keys[:, :3].clone(), layer.cross_attn.keys) for layer in cache.layers]
    buffers = [layer.self_attn.keys.data_ptr() for layer in cache.layers]
    index = torch.tensor([2, 2, 0])  # a row twice, as beams do
    cache.select(index)
    for layer, (keys, cross), ptr in zip(cache.layers, before, buffers):
        assert layer.self_attn.keys.data_ptr() == ptr and layer.self_attn.keys.shape == (3, 10, 4, 8)
        assert torch.equal(layer.self_attn.keys[:, :3], keys[index]) and layer.self_attn.length == 3
        assert layer.cross_attn.keys is cross  # no memory_index: the memory's K, V stay
    cache.select(torch.tensor([1, 0, 1, 2]), torch.tensor([0, 2]))  # more rows than the buffers have: new ones
    for layer, (keys, cross) in zip(cache.layers, before):
        assert layer.self_attn.keys.shape == (4, 10, 4, 8)
        assert torch.equal(layer.self_attn.keys[:, :3], keys[index][[1, 0, 1, 2]])
        assert torch.equal(layer.cross_attn.keys, cross[[0, 2]])
