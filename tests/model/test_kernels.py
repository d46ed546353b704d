"""Kernels chosen per CPU: each layer shape timed once on every path, another path than torch's
taken only where it is GAIN times faster, the choice kept per CPU in the cache file and read by the
next process; kernels=default measures nothing; a model on its chosen kernels computes as the
model does."""

import json
import time

import pytest
import torch
from torch import nn

from transformer_mt.model import Transformer, TransformerConfig
from transformer_mt.model.kernels import GAIN, Kernels, cpu_key
from transformer_mt.model.quantize import fp32_layer, on_kernels, quantize_int8


class Slow(nn.Module):
    """A layer that takes `seconds` a call."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.seconds)
        return x


def timed_paths(**seconds: float):
    """build(linear, path) for paths that take the given seconds a call."""
    return lambda linear, path: Slow(seconds[path])


@pytest.mark.parametrize("times, expected", [
    ({"torch": 0.006, "onednn": 0.002}, "onednn"),  # 3x faster
    ({"torch": 0.002, "onednn": 0.002}, "torch"),  # as fast: torch's path stays
    ({"torch": 0.002, "onednn": 0.006}, "torch"),
])
def test_fp32_takes_onednn_only_where_it_is_gain_times_faster(tmp_path, times, expected):
    assert GAIN > 1
    kernels = Kernels("auto", tmp_path / "kernels.json")
    assert kernels.choice("fp32", nn.Linear(8, 16), timed_paths(**times)) == expected
    assert kernels.measured == 1


def test_an_int8_layer_may_stay_fp32_where_int8_is_slower(tmp_path):
    kernels = Kernels("auto", tmp_path / "kernels.json")
    build = timed_paths(torch=0.006, onednn=0.005, fp32=0.002)
    assert kernels.choice("int8", nn.Linear(8, 16), build) == "fp32"
    assert "int8 layer shapes: 1 on fp32" in kernels.describe()


def test_each_shape_is_measured_once_and_the_next_process_reads_the_choice(tmp_path):
    cache = tmp_path / "kernels.json"
    first = Kernels("auto", cache)
    fast_onednn = timed_paths(torch=0.006, onednn=0.002)
    for linear in (nn.Linear(8, 16), nn.Linear(8, 16), nn.Linear(16, 8)):
        first.choice("fp32", linear, fast_onednn)
    assert first.measured == 2  # two shapes
    assert json.loads(cache.read_text())[cpu_key()] == {"fp32 8x16 +bias": "onednn", "fp32 16x8 +bias": "onednn"}

    def never(linear, path):
        raise AssertionError("measured again")

    later = Kernels("auto", cache)  # another process on this CPU
    assert later.choice("fp32", nn.Linear(8, 16), never) == "onednn" and later.measured == 0
    assert "as measured before" in later.describe()
    assert Kernels("default", cache).choice("fp32", nn.Linear(99, 7), never) == "torch"


def test_an_unreadable_cache_is_measured_again_and_an_unwritable_one_only_not_kept(tmp_path, caplog):
    cache = tmp_path / "kernels.json"
    cache.write_text("{not json")
    kernels = Kernels("auto", cache)
    assert kernels.choice("fp32", nn.Linear(8, 16), timed_paths(torch=0.002, onednn=0.002)) == "torch"
    assert json.loads(cache.read_text())[cpu_key()] == {"fp32 8x16 +bias": "torch"}
    blocked = tmp_path / "file"
    blocked.write_text("")
    stuck = Kernels("auto", blocked / "kernels.json")  # its folder is a file
    assert stuck.choice("fp32", nn.Linear(8, 16), timed_paths(torch=0.002, onednn=0.002)) == "torch"
    assert "the choices are not kept" in caplog.text


def test_a_model_on_its_chosen_kernels_computes_as_the_model(tmp_path):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=40, tgt_vocab_size=40, num_encoder_layers=1,
                                          num_decoder_layers=1, d_model=16, d_ff=32, heads=2)).eval()
    src, tgt = torch.randint(3, 40, (3, 7)), torch.randint(3, 40, (3, 5))
    all_torch = Kernels("auto", tmp_path / "a.json")
    for linear in (m for m in model.modules() if type(m) is nn.Linear):  # every shape: torch's path
        all_torch.choice("fp32", linear, timed_paths(torch=0.001, onednn=0.001))
    assert on_kernels(model, all_torch) is model  # no copy where nothing moves
    on_onednn = Kernels("auto", tmp_path / "b.json")
    for linear in (m for m in model.modules() if type(m) is nn.Linear):
        on_onednn.choice("fp32", linear, timed_paths(torch=0.006, onednn=0.001))
    copy = on_kernels(model, on_onednn)
    assert copy is not model and not any(type(m) is nn.Linear for m in copy.modules())
    with torch.no_grad():
        torch.testing.assert_close(copy(src, tgt), model(src, tgt), rtol=1e-5, atol=1e-5)
    assert type(fp32_layer(nn.Linear(4, 4), "torch")) is nn.Linear
    int8 = quantize_int8(model, on_onednn)  # the int8 shapes measured for real: a choice among the three paths
    assert set(on_onednn.chosen.values()) <= {"torch", "onednn", "fp32"}
    with torch.no_grad():
        assert (int8(src, tgt) - model(src, tgt)).abs().max() < 0.05 * model(src, tgt).abs().max()
