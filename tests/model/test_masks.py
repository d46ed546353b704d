"""Masks hide exactly what they should."""

import pytest
import torch

from tests.helpers import make_model, padded_sources
from transformer_mt.model.maps import attention_maps
from transformer_mt.training.loss import output_layer_loss


def test_future_target_tokens_do_not_change_earlier_logits(model):
    src = torch.randint(4, 50, (3, 7))
    tgt = torch.randint(4, 50, (3, 9))
    base = model(src, tgt)
    for t in range(8):
        changed = tgt.clone()
        changed[:, t + 1 :] = torch.randint(4, 50, (3, 8 - t))
        out = model(src, changed)
        torch.testing.assert_close(out[:, : t + 1], base[:, : t + 1], atol=1e-5, rtol=0)
        assert not torch.allclose(out[:, t + 1 :], base[:, t + 1 :])  # later positions do see them


def test_padded_source_positions_have_no_effect(model):
    short = torch.randint(4, 50, (1, 5))
    tgt = torch.randint(4, 50, (1, 6))
    alone = model(short, tgt)
    for pad_len in (1, 4, 11):
        padded = torch.cat([short, torch.zeros(1, pad_len, dtype=torch.long)], dim=1)
        torch.testing.assert_close(model(padded, tgt), alone, atol=1e-5, rtol=0)
    # batched with a longer sentence: the short one is padded and must not change
    long = torch.randint(4, 50, (1, 12))
    batch = torch.zeros(2, 12, dtype=torch.long)
    batch[0, :5], batch[1] = short[0], long[0]
    out = model(batch, tgt.expand(2, -1))
    torch.testing.assert_close(out[:1], alone, atol=1e-5, rtol=0)


def test_padded_target_positions_do_not_change_real_ones(model):
    src = torch.randint(4, 50, (1, 6))
    tgt = torch.randint(4, 50, (1, 4))
    alone = model(src, tgt)
    padded = torch.cat([tgt, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(src, padded)[:, :4], alone, atol=1e-5, rtol=0)


def test_cross_attention_sees_the_whole_source_not_a_causal_prefix(model):
    """The first target position depends on the last source token (no causal mask on memory)."""
    src = torch.randint(4, 50, (1, 8))
    tgt = torch.randint(4, 50, (1, 3))
    changed = src.clone()
    changed[0, -1] = (src[0, -1] + 1 - 4) % 46 + 4
    assert not torch.allclose(model(src, tgt)[:, 0], model(changed, tgt)[:, 0])


def test_mask_values():
    model = make_model()
    tgt = torch.tensor([[1, 5, 6, 0], [1, 7, 0, 0]])
    assert torch.equal(model.padding_mask(tgt)[:, 0, 0], tgt != 0)
    assert model.padding_mask(tgt).shape == (2, 1, 1, 4)


def masked_decoder_states(model, tgt, memory, src):
    """The decoder as it was before `is_causal`: self-attention masked to causal AND key-not-padding
    (position 0, the start token, always a key)."""
    key_ok = tgt != model.config.pad_id
    key_ok[:, 0] = True
    t = tgt.size(1)
    self_mask = torch.ones(t, t, dtype=torch.bool).tril()[None, None] & key_ok[:, None, None, :]
    x = model.embed_dropout(model.tgt_pos(model.tgt_embed(tgt)))
    for layer in model.decoder_layers:
        x = layer.self_block(x, lambda h, layer=layer: layer.self_attn(h, mask=self_mask))
        x = layer.cross_block(x, lambda h, layer=layer: layer.cross_attn(h, memory, model.padding_mask(src)))
        x = layer.ffn_block(x, layer.ffn)
    return model.decoder_norm(x)


@pytest.mark.parametrize("norm_first", [False, True])
def test_causal_self_attention_without_a_mask_equals_the_masked_path_on_padded_batches(norm_first):
    """Right-padded targets: every real position gets exactly what the padding-masked path gave (a
    real position only sees earlier keys, all real); the loss never sees the padded positions."""
    model = make_model(norm_first=norm_first)
    src = padded_sources()
    tgt = torch.randint(4, 50, (4, 7))
    tgt[:, 0] = 1
    for row, length in enumerate([7, 3, 5, 1]):
        tgt[row, length:] = 0
    memory = model.encode(src)
    ours, masked = model.features(src, tgt), masked_decoder_states(model, tgt, memory, src)
    real = tgt != 0
    real[:, 0] = True
    torch.testing.assert_close(ours[real], masked[real], atol=1e-6, rtol=1e-5)
    assert not torch.allclose(ours[~real], masked[~real])  # padded positions differ, and nothing reads them
    # ... as the loss shows: any tokens in the padded target positions give the same loss and gradients
    model.train(False)
    tgt_out = torch.cat([tgt[:, 1:], torch.zeros(4, 1, dtype=torch.long)], dim=1)
    tgt_out[real.roll(-1, dims=1) & real] = torch.randint(4, 50, (int((real.roll(-1, 1) & real).sum()),))
    changed = tgt.masked_fill(~real, 9)
    losses = []
    for tokens in (tgt, changed):
        model.zero_grad()
        out = model.output_proj
        loss = output_layer_loss(model.features(src, tokens), out.weight, out.bias, tgt_out, 0.1, 0)[0]
        loss.backward()
        losses.append((loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    torch.testing.assert_close(losses[0][0], losses[1][0], atol=0, rtol=0)
    for a, b in zip(losses[0][1], losses[1][1]):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_attention_weights_are_zero_exactly_where_masked(model):
    src = torch.tensor([[5, 6, 7, 2, 0, 0]])
    tgt = torch.tensor([[1, 8, 9]])
    with attention_maps(model) as maps:
        model(src, tgt)
    assert len(maps.encoder) == 2 and maps.encoder[0].shape == (1, 4, 6, 6)
    for w in maps.encoder + maps.cross:
        assert torch.all(w[..., 4:] == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
    for w in maps.decoder_self:
        assert torch.all(w.triu(1) == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
