"""Cross-attention alignments: exactly the argmax of one layer's attention, row by row, whatever the
batch, its padding and the other outputs; the options name their key."""

import pytest
import torch

from tests.helpers import make_model, padded_sources
from transformer_mt.decoding.alignment import CrossAttentionAligner
from transformer_mt.errors import ConfigError
from transformer_mt.model.maps import attention_maps

BOS, EOS = 1, 2


def by_hand(model, src_row: torch.Tensor, tokens: list[int], layer: int, heads) -> list[int]:
    """One sentence alone, unpadded: the decoder reads BOS t_0 ... t_{n-1}; the row that predicts
    t_j is row j, its heads combined, its argmax over the source tokens but the last (EOS)."""
    src = src_row[src_row != 0][None]
    with attention_maps(model) as maps:
        model.features(src, torch.tensor([[BOS, *tokens]]))
    weights = maps.cross[layer][0]  # (H, n + 1, S)
    combined = weights.mean(0) if heads == "mean" else weights.amax(0) if heads == "max" else weights[heads]
    return combined[: len(tokens), :-1].argmax(-1).tolist()


@pytest.mark.parametrize("layer, heads", [(-1, "mean"), (0, "mean"), (1, "max"), (-2, 3)])
def test_each_output_token_gets_the_argmax_of_its_own_row(layer, heads):
    model, src = make_model(), padded_sources()
    torch.manual_seed(2)
    outputs = [torch.randint(4, 50, (n,)).tolist() for n in (7, 1, 0, 11)]  # an empty output too
    got = CrossAttentionAligner(layer, heads)(model, src, outputs, BOS, EOS)
    assert [len(row) for row in got] == [7, 1, 0, 11]
    for row, tokens, links in zip(src, outputs, got):
        assert links == (by_hand(model, row, tokens, layer, heads) if tokens else [])
        assert all(0 <= i < int((row != 0).sum()) - 1 for i in links)  # never EOS, never padding


def test_the_source_eos_is_never_a_link_though_attention_often_peaks_there():
    model, src = make_model(), padded_sources()
    outputs = [[5, 6, 7, 8, 9]] * 4
    with attention_maps(model) as maps:
        model.features(src, torch.tensor([[BOS, 5, 6, 7, 8]] * 4))
    peaks = src.gather(1, maps.cross[0].mean(1).argmax(-1))
    assert (peaks == EOS).sum() >= 5  # of 20 tokens
    for row, links in zip(src, CrossAttentionAligner(0)(model, src, outputs, BOS, EOS)):
        assert len(links) == 5 and all(row[i] not in (0, EOS) for i in links)


def test_no_outputs_or_only_empty_ones():
    model, src = make_model(), padded_sources()
    assert CrossAttentionAligner()(model, src, [[], [], [], []], BOS, EOS) == [[], [], [], []]


@pytest.mark.parametrize("layer, heads, message", [
    (2, "mean", "task.alignment_layer=2: the model has 2 decoder layers (0 to 1, or -1 for the last)"),
    (-3, "mean", "task.alignment_layer=-3: the model has 2 decoder layers"),
    ("last", "mean", "task.alignment_layer='last'"),
    (0, "sum", "task.alignment_heads='sum': must be mean, max or a head number (0 to 3)"),
    (0, 4, "task.alignment_heads=4"),
    (0, True, "task.alignment_heads=True"),
])
def test_layers_and_heads_the_model_lacks_name_the_key(layer, heads, message):
    with pytest.raises(ConfigError) as err:
        CrossAttentionAligner(layer, heads).check(num_layers=2, num_heads=4)
    assert str(err.value).startswith(message)
    assert CrossAttentionAligner(-2, 3).check(num_layers=2, num_heads=4) == CrossAttentionAligner(-2, 3)
