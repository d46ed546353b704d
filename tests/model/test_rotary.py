"""model.positional=rotary: queries and keys of self-attention rotated by their positions (RoPE).
Their dot products depend on the positions' difference only; no position is added to the
embeddings; heads of odd width are refused in one line. (The cache:
tests/model/test_transformer.py; the static step: test_relative.py; packed streams:
test_packing.py; the CTranslate2 export: tests/interop/test_ct2_positions.py.)"""


import pytest
import torch
from omegaconf import OmegaConf

from tests.helpers import make_model
from transformer_mt.errors import ConfigError
from transformer_mt.model.rotary import Rotary
from transformer_mt.schema.architecture import ModelGroup
from transformer_mt.schema.keys import check_keys


def test_a_rotated_dot_product_depends_on_the_distance_only():
    rotary = Rotary(8, 64)
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(i: int, j: int) -> float:
        return float((rotary(q, torch.tensor([i])) * rotary(k, torch.tensor([j]))).sum())

    assert score(3, 1) == pytest.approx(score(12, 10), abs=1e-5) == pytest.approx(score(40, 38), abs=1e-5)
    assert score(3, 1) != pytest.approx(score(3, 2), abs=1e-3)
    assert float(rotary(q, torch.tensor([0])).sub(q).abs().max()) == 0.0  # position 0: no rotation
    assert torch.allclose(rotary(q, torch.tensor([5])).norm(), q.norm())  # a rotation keeps the length


def test_positions_change_the_outputs_and_nothing_is_added_to_the_embeddings():
    model = make_model(positional="rotary", dropout=0.0)
    assert not [name for name, _ in model.named_parameters() if "learned" in name]
    src = torch.randint(4, 50, (1, 6))
    memory = model.encode(src)
    # the same tokens in another order: a model without positions would give the same set of states
    flipped = model.encode(src.flip(1))
    assert not torch.allclose(memory.flip(1), flipped, atol=1e-4)


def test_heads_of_odd_width_are_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^model\.d_k=5: must be even with model\.positional=rotary"):
        check_keys(OmegaConf.structured(ModelGroup(positional="rotary", d_model=20, heads=4)), "model.")
