"""M2M-100 / NLLB-200 folders (M2M100ForConditionalGeneration) read as our Transformer
(interop/m2m100.py): on tiny random models that transformers builds here (no download), our
teacher-forced logits equal theirs, padded batches included; fairseq's position table is theirs;
what ours cannot represent is refused in one line naming the config field."""

from pathlib import Path

import pytest
import torch

from transformer_mt.errors import DataError
from transformer_mt.interop.m2m100 import read_m2m100_model
from transformer_mt.model import Transformer
from transformer_mt.model.positions import fairseq_table

transformers = pytest.importorskip("transformers")

TINY = dict(vocab_size=64, d_model=16, encoder_layers=2, decoder_layers=3, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=40,
            pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, dropout=0.0)


def saved(folder: Path, **overrides) -> Path:
    """A random M2M100ForConditionalGeneration of TINY's shape saved in `folder` (safetensors)."""
    torch.manual_seed(0)
    model = transformers.M2M100ForConditionalGeneration(transformers.M2M100Config(**{**TINY, **overrides}))
    model.eval().save_pretrained(folder)
    return folder


def test_fairseq_table_is_m2m100s_from_its_first_position():
    theirs = transformers.models.m2m_100.modeling_m2m_100.M2M100SinusoidalPositionalEmbedding.get_embedding(
        42, 16, padding_idx=1)
    assert torch.equal(fairseq_table(40, 16), theirs[2:])
    odd = transformers.models.m2m_100.modeling_m2m_100.M2M100SinusoidalPositionalEmbedding.get_embedding(12, 9, 1)
    assert torch.equal(fairseq_table(10, 9), odd[2:])


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_teacher_forced_logits_equal_transformers(tmp_path, activation):
    folder = saved(tmp_path / "m2m", activation_function=activation)
    architecture, state, config = read_m2m100_model(folder, f"model.init_from={folder}")
    assert (architecture["norm_first"], architecture["positional"], architecture["num_decoder_layers"]) == (
        True, "fairseq", 3)
    ours = Transformer(config).eval()
    ours.load_state_dict(state)
    theirs = transformers.M2M100ForConditionalGeneration.from_pretrained(folder).eval()
    torch.manual_seed(1)
    src = torch.randint(4, 64, (3, 9))
    src[:, -1] = 2
    src[1, 5], src[1, 6:] = 2, 1  # a shorter source, padded
    tgt = torch.randint(4, 64, (3, 7))
    tgt[:, 0] = 2  # the decoder starts from </s>
    with torch.no_grad():
        expected = theirs(input_ids=src, attention_mask=(src != 1).long(), decoder_input_ids=tgt).logits
        got = ours(src, tgt)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("overrides, field", [
    ({"scale_embedding": False}, "scale_embedding"),
    ({"decoder_ffn_dim": 24}, "decoder_ffn_dim"),
    ({"pad_token_id": 0, "bos_token_id": 1}, "pad_token_id"),
])
def test_what_ours_cannot_represent_is_refused_naming_the_field(tmp_path, overrides, field):
    folder = saved(tmp_path / "m2m", **overrides)
    with pytest.raises(DataError) as refused:
        read_m2m100_model(folder, f"model.init_from={folder}")
    assert str(refused.value).startswith(f"model.init_from={folder}: config.json's {field} is ")
