"""Both engines (inference/engine.py) implement the Engine protocol and declare what they can do;
CTranslate2's refusals come from its declaration, and its options from what each search declares."""

import pytest
from omegaconf import OmegaConf

from transformer_mt.decoding import BeamSearch, GnmtLength, GreedySearch, PowerLength, Sampling, SearchOptions
from transformer_mt.errors import ConfigError
from transformer_mt.inference.ct2_engine import Ct2Translator, check_engine, engine_options
from transformer_mt.inference.engine import Engine
from transformer_mt.inference.translator import Translator

OPTIONS = SearchOptions(min_len=2, no_repeat_ngram_size=3)
COMMON = {"min_decoding_length": 2, "no_repeat_ngram_size": 3, "return_scores": True}


def test_both_engines_are_engines_and_declare_what_they_can_do():
    assert Engine in Translator.__mro__ and Engine in Ct2Translator.__mro__
    ours, theirs = Translator.capabilities, Ct2Translator.capabilities
    assert ours.ensembles and ours.alignments and ours.constraints and ours.any_length_norm
    assert not (theirs.ensembles or theirs.alignments or theirs.constraints)
    assert not theirs.any_length_norm


@pytest.mark.parametrize("search, expected", [
    (GreedySearch(OPTIONS), {**COMMON, "beam_size": 1}),
    (BeamSearch(5, PowerLength(0.6), nbest=2, options=OPTIONS),
     {**COMMON, "beam_size": 5, "num_hypotheses": 2, "length_penalty": 0.6}),
    (Sampling(0.7, top_k=10, top_p=0.9, nbest=3, options=OPTIONS),
     {**COMMON, "beam_size": 1, "num_hypotheses": 3, "sampling_topk": 10, "sampling_topp": 0.9,
      "sampling_temperature": 0.7}),
])
def test_ctranslate2_options_follow_what_each_search_declares(search, expected):
    assert engine_options(search) == expected


def test_a_length_norm_ctranslate2_does_not_declare_is_refused():
    with pytest.raises(ConfigError, match="task.engine=ctranslate2 has only the exponential length penalty"):
        engine_options(BeamSearch(4, GnmtLength()))


@pytest.mark.parametrize("task, paths, constrained, message", [
    ({}, ["a.ckpt", "b.ckpt"], False, "task.engine=ctranslate2 decodes one checkpoint"),
    ({"alignment": True}, ["a.ckpt"], False, "task.alignment=true reads our model's cross-attention"),
    ({}, ["a.ckpt"], True, "decoding.constraints=true: task.engine=ctranslate2 has no constrained search"),
])
def test_what_ctranslate2_does_not_declare_is_refused_before_any_work(task, paths, constrained, message):
    pytest.importorskip("ctranslate2")
    with pytest.raises(ConfigError, match=message):
        check_engine(OmegaConf.create({"task": task}), paths, constrained)
    check_engine(OmegaConf.create({"task": {}}), ["a.ckpt"])  # one checkpoint, nothing else: taken
