"""Subword regularization (data.tokenizer.dropout: BPE-dropout, or sentencepiece's sampling) keeps
runs reproducible: a run stopped mid-epoch by SIGTERM and resumed ends with the weights of the
uninterrupted run, bit for bit (the resumed epoch draws the same segmentation). That dropout changes
what is trained on, every epoch, is tests/data/test_dropout.py's."""

import pytest
import torch

from tests.helpers import compose_config, interrupt_at
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow
SMALL = ["data.corpora.toy.num_train=600", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20",
         "data.max_tokens=512", "~callbacks.epoch_checkpoint", "callbacks.last_checkpoint.every_n_steps=4",
         "trainer.max_epochs=2", "data.tokenizer.dropout=0.1"]


def weights(path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)["state_dict"]


@pytest.mark.parametrize("tokenizer", ["bpe", "sentencepiece"])
def test_a_run_with_subword_regularization_resumed_mid_epoch_is_bit_identical(tmp_path, tokenizer):
    cache, common = tmp_path / "cache", [*SMALL, f"data.tokenizer.type={tokenizer}"]
    run(compose_config(tmp_path / "whole", common, cache_dir=cache))
    with pytest.raises(SystemExit) as stopped:
        run(compose_config(tmp_path / "part", [*common, *interrupt_at(9, "SIGTERM")], cache_dir=cache))
    assert stopped.value.code == 143
    last = tmp_path / "part" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 10  # mid-epoch 0
    run(compose_config(tmp_path / "part", [*common, f"ckpt_path={last}"], cache_dir=cache))
    whole, resumed = weights(tmp_path / "whole" / "checkpoints" / "last.ckpt"), weights(last)
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
