"""The module is built whole from a checkpoint's hyper-parameters (tokenizer and decoding included),
and checkpoints written before that (tokenizer beside the hyper-parameters) keep working."""

import pytest
import torch

from tests.helpers import ROOT, compose_config
from transformer_mt.checkpoints.loading import read_checkpoint
from transformer_mt.checkpoints.upgrades import (
    UPGRADES,
    corpus_as_first_of_corpora,
    current_decoding,
    decoding_with_search_options,
    sizes_from_the_tokenizer,
    tokenizer_as_hyper_parameter,
    upgrade,
)
from transformer_mt.decoding import BeamSearch, GnmtLength, GreedySearch, PowerLength, SearchOptions
from transformer_mt.errors import DataError
from transformer_mt.tasks import run
from transformer_mt.training.from_checkpoint import load_module

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


def test_decoding_configs_of_earlier_checkpoints_load_with_their_options():
    """Before SearchOptions a checkpoint kept every search option flat, beam search's length
    normalization as a name with `length_penalty`, and `quantize`: they load as they were meant."""
    module = load_module(LEGACY)  # greedy, written 2026-11-22
    assert module.search.options == SearchOptions(max_len_a=1.2, max_len_b=10) and module.quantize == "none"
    saved = torch.load(LEGACY, weights_only=True)["hyper_parameters"]  # sizes and ids kept beside the tokenizer
    assert (module.pad_id, module.bos_id, module.eos_id) == (saved["pad_id"], saved["bos_id"], saved["eos_id"])
    assert module.model.config.src_vocab_size == saved["src_vocab_size"] and "pad_id" not in module.hparams
    shipped = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"  # beam 5, fairseq's normalization
    old = torch.load(shipped, weights_only=True, mmap=True)["hyper_parameters"]["decoding"]
    search = load_module(shipped).search
    assert (search.beam_size, search.length_norm, search.options) == (
        5, PowerLength(1.0), SearchOptions(max_len_a=1.0, max_len_b=50))
    assert (old["length_norm"], old["length_penalty"], old["quantize"]) == ("fairseq", 1.0, "none")
    paper = {"_target_": "transformer_mt.decoding.BeamSearch", "beam_size": 4, "length_penalty": 0.6,
             "length_norm": "gnmt", "max_len_a": 1.0, "max_len_b": 50, "quantize": "int8", "check_every": 8}
    decoding, quantize = current_decoding(paper)
    assert quantize == "int8" and decoding == {
        "_target_": "transformer_mt.decoding.BeamSearch", "beam_size": 4,
        "length_norm": {"_target_": "transformer_mt.decoding.GnmtLength", "alpha": 0.6},
        "options": {"_target_": "transformer_mt.decoding.SearchOptions", "max_len_a": 1.0, "max_len_b": 50,
                    "check_every": 8}}
    assert current_decoding(decoding) == (decoding, None)  # today's layout is left as it is
    assert GnmtLength(0.6)(7) == ((5 + 7) / 6) ** 0.6 and PowerLength(2.0)(3) == 9.0


def test_a_checkpoint_whose_ids_disagree_with_its_tokenizer_is_one_line(tmp_path):
    checkpoint = torch.load(LEGACY, weights_only=True)
    checkpoint["hyper_parameters"]["eos_id"] = 7
    torch.save(checkpoint, tmp_path / "bad.ckpt")
    with pytest.raises(DataError, match=r"bad.ckpt: its tokenizer does not match its model: eos_id=7 \(its "
                                          r"tokenizer: 2\)"):
        load_module(tmp_path / "bad.ckpt")


def test_each_upgrade_brings_a_checkpoint_of_its_era_to_the_next_and_leaves_a_newer_one_alone():
    """The upgrades, in order, on the 2026-11-22 fixture (tokenizer beside the hyper-parameters, sizes
    and ids as hyper-parameters, flat decoding options, the data record's `corpus`) and on the shipped
    model (tokenizer as a hyper-parameter, sizes and ids too, flat beam options with quantize in the
    decoding); each step changes only what its era wrote."""
    assert [step.__name__ for step in UPGRADES] == [
        "tokenizer_as_hyper_parameter", "sizes_from_the_tokenizer", "decoding_with_search_options",
        "corpus_as_first_of_corpora"]
    legacy = torch.load(LEGACY, weights_only=True)
    first = tokenizer_as_hyper_parameter(legacy)
    assert "tokenizer" not in first and first["hyper_parameters"]["tokenizer"] == legacy["tokenizer"]
    second = sizes_from_the_tokenizer(first)
    assert {"src_vocab_size", "pad_id", "eos_id"} & set(second["hyper_parameters"]) == set()
    third = decoding_with_search_options(second)
    assert third["hyper_parameters"]["decoding"]["options"]["max_len_b"] == 10
    fourth = corpus_as_first_of_corpora(third)
    was, now = third["hyper_parameters"]["data"]["config"], fourth["hyper_parameters"]["data"]["config"]
    assert "corpus" not in now and now["corpora"] == {"main": was["corpus"]}  # the name it had, first
    assert {k: v for k, v in now.items() if k != "corpora"} == {k: v for k, v in was.items() if k != "corpus"}
    assert upgrade(legacy) == fourth and read_checkpoint(LEGACY)["hyper_parameters"] == fourth["hyper_parameters"]
    assert upgrade(fourth) == fourth  # today's layout passes through every step unchanged
    student = {"hyper_parameters": {"data": {"fingerprints": {}, "config": {
        "corpus": {"tag": None}, "corpora": {"distilled": {"tag": "bt"}}}}}}
    assert list(corpus_as_first_of_corpora(student)["hyper_parameters"]["data"]["config"]["corpora"]) == [
        "main", "distilled"]
    shipped = torch.load(ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt", weights_only=True, mmap=True)
    assert tokenizer_as_hyper_parameter(shipped) is shipped  # its tokenizer is a hyper-parameter already
    sized = sizes_from_the_tokenizer(shipped)["hyper_parameters"]
    assert "pad_id" in shipped["hyper_parameters"] and "pad_id" not in sized
    decoding = decoding_with_search_options(shipped)["hyper_parameters"]
    assert decoding["quantize"] == "none" and decoding["decoding"]["length_norm"]["alpha"] == 1.0
    joint = {"hyper_parameters": {"model": {}}, "tokenizer": "{}"}  # the first checkpoints: one JSON string
    assert tokenizer_as_hyper_parameter(joint)["hyper_parameters"]["tokenizer"] == {
        "src": {"kind": "tokenizers", "data": "{}"}, "tgt": None}
