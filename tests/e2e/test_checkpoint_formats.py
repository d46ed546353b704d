"""The module is built whole from a checkpoint's hyper-parameters (tokenizer and decoding included),
and checkpoints written before that (tokenizer beside the hyper-parameters) keep working."""

import torch

from tests.helpers import ROOT, compose_config
from transformer_mt.decoding import BeamSearch, GreedySearch
from transformer_mt.tasks import run
from transformer_mt.tasks.checkpoints import load_module

# written by the code of 2026-11-22 (commit "Dashboards: ..."): model d_model 16, 1 + 1 layers, toy data
# with 10 test sentences, one epoch; its test translations and chrF as that code produced them
LEGACY = ROOT / "tests" / "fixtures" / "checkpoint-before-tokenizer-hparam.ckpt"
LEGACY_TRANSLATIONS = ROOT / "tests" / "fixtures" / "checkpoint-before-tokenizer-hparam.test.txt"
LEGACY_CHRF = 2.210829685868738


def test_a_checkpoint_of_the_earlier_format_evaluates_as_it_did(tmp_path):
    assert "tokenizer" not in torch.load(LEGACY, weights_only=True)["hyper_parameters"]
    metrics = run(compose_config(tmp_path, ["task=evaluate", f"ckpt_path={LEGACY}"]))
    assert metrics["test/chrf"] == LEGACY_CHRF
    assert (tmp_path / "test.translations.txt").read_text() == LEGACY_TRANSLATIONS.read_text()


def test_load_module_gives_a_ready_module_with_the_decoding_asked_for(small_checkpoint):
    saved = torch.load(small_checkpoint, weights_only=True)
    assert "tokenizer" in saved["hyper_parameters"] and "tokenizer" not in saved  # kept once
    module = load_module(small_checkpoint)
    assert isinstance(module.search, GreedySearch) and not module.training
    beam = {"_target_": "transformer_mt.decoding.BeamSearch", "beam_size": 3}
    for path in (small_checkpoint, LEGACY):
        module = load_module(path, beam)
        assert isinstance(module.search, BeamSearch) and module.search.beam_size == 3
        assert module.hparams.decoding == beam
        src = torch.tensor(module.tokenizer.encode_sources(["every red city hears the happy sailor"]))
        (nbest,) = module.translate(src)
        assert len(nbest) == 1 and isinstance(nbest[0][0], str)
