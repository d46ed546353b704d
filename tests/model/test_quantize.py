"""int8 with a scale per row: a row's result is the same, bit for bit, alone or in a batch of any
size and any other rows; it is close to the fp32 product (within a few quantization steps of the
row's range); nonnegative inputs get twice the levels; the output rows of a shortlist equal those
columns of the whole layer; a model's int8 copy replaces every linear layer and leaves the model as it was."""

import pytest
import torch
from torch import nn

from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.model.quantize import RowScaledInt8Linear, quantize_int8


def layer(bias: bool = True, d_in: int = 64, d_out: int = 96) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(d_in, d_out, bias=bias)


@pytest.mark.parametrize("bias", [True, False])
def test_a_row_gives_the_same_bits_alone_and_in_any_batch(bias):
    int8 = RowScaledInt8Linear.from_linear(layer(bias))
    rows = torch.randn(7, 64)
    alone = torch.cat([int8(rows[i : i + 1]) for i in range(7)])
    for others in (1, 5, 33, 200):
        mixed = torch.cat([rows, 50 * torch.randn(others, 64)])  # rows of a far larger range beside them
        assert torch.equal(int8(mixed)[:7], alone), others
        assert torch.equal(int8(mixed.flip(0))[-7:].flip(0), alone), others  # and at other places
    assert torch.equal(int8(rows.view(7, 1, 64)).view(7, 96), alone)  # any leading shape


def test_close_to_fp32_by_the_rows_own_range():
    fp32 = layer()
    int8 = RowScaledInt8Linear.from_linear(fp32)
    rows = torch.randn(32, 64) * torch.logspace(-3, 3, 32)[:, None]  # rows of very different ranges
    with torch.no_grad():
        exact, approx = fp32(rows) - fp32.bias, int8(rows) - fp32.bias
    # each input row in 127 levels of its own range, each weight row in 255 of its own: a row's error
    # stays a small share of that row's own output, at every range (one scale for all would lose the small rows)
    error = (exact - approx).abs().amax(dim=1) / exact.abs().amax(dim=1)
    assert error.max() < 0.05, error


def test_nonnegative_inputs_get_finer_levels():
    fp32 = layer()
    signed, nonnegative = (RowScaledInt8Linear.from_linear(fp32, nonnegative=n) for n in (False, True))
    rows = torch.relu(torch.randn(256, 64))
    with torch.no_grad():
        exact = fp32(rows)
        err_signed = (signed(rows) - exact).pow(2).mean()
        err_nonnegative = (nonnegative(rows) - exact).pow(2).mean()
    assert err_nonnegative < 0.5 * err_signed, (err_nonnegative, err_signed)


def test_a_shortlist_of_output_rows_equals_those_columns():
    int8 = RowScaledInt8Linear.from_linear(layer())
    rows = torch.tensor([0, 5, 17, 95, 40])
    x = torch.randn(9, 64)
    assert torch.equal(int8.restricted(rows)(x), int8(x)[:, rows])


def test_the_int8_copy_replaces_every_linear_layer_and_leaves_the_model():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=50, tgt_vocab_size=50, num_encoder_layers=2,
                                          num_decoder_layers=2, d_model=32, d_ff=64, heads=4)).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    int8 = quantize_int8(model)
    assert not any(type(m) is nn.Linear for m in int8.modules())
    linear2 = [m for name, m in int8.named_modules() if name.endswith("ffn.linear2")]
    assert len(linear2) == 4 and all(m.anchor[0, 0] == 0 for m in linear2)  # after a ReLU: [0, 1]
    assert all(m.anchor[0, 0] == -1 for name, m in int8.named_modules()
               if isinstance(m, RowScaledInt8Linear) and not name.endswith("ffn.linear2"))
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    src, tgt = torch.randint(3, 50, (4, 9)), torch.randint(3, 50, (4, 7))
    with torch.no_grad():
        assert (int8(src, tgt) - model(src, tgt)).abs().max() < 0.05 * model(src, tgt).abs().max()
