"""Masks hide exactly what they should."""

import torch

from tests.helpers import make_model


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
    mask = model.causal_mask(tgt)
    expected_row0 = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]], dtype=torch.bool)
    expected_row1 = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]], dtype=torch.bool)
    assert torch.equal(mask[0, 0], expected_row0)
    assert torch.equal(mask[1, 0], expected_row1)
    assert model.causal_mask(torch.tensor([[1, 5, 6]])) is None  # no padding: plain causal attention
    assert torch.equal(model.padding_mask(tgt)[:, 0, 0], tgt != 0)


def test_attention_weights_are_zero_exactly_where_masked(model):
    src = torch.tensor([[5, 6, 7, 2, 0, 0]])
    tgt = torch.tensor([[1, 8, 9]])
    weights = model.attention_weights(src, tgt)
    assert len(weights["encoder"]) == 2 and weights["encoder"][0].shape == (1, 4, 6, 6)
    for w in weights["encoder"] + weights["cross"]:
        assert torch.all(w[..., 4:] == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
    for w in weights["decoder_self"]:
        assert torch.all(w.triu(1) == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
