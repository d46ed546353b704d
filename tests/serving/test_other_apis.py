"""The language routing of the LibreTranslate mount and /v1/translations (serving/other_apis.py): a
(source, target) pair picks the model and tag whose corpora name it, auto identifies the source
among those that reach the target, and a pair no model serves is one line naming the key."""

from types import SimpleNamespace

import pytest

from transformer_mt.serving.api import RequestError
from transformer_mt.serving.other_apis import Directions
from transformer_mt.serving.served import directions


def served(name: str, pairs: dict, codes: tuple[str, ...] = ()) -> SimpleNamespace:
    return SimpleNamespace(name=name, directions=pairs, codes=codes)


BOTH = Directions({"both": served("both", {("en", "de"): "2de", ("de", "en"): "2en"}),
                   "fr": served("fr", {("en", "fr"): None, ("en", "de"): None})})


def test_a_models_directions_are_its_corpora_languages_and_tags():
    data = {"corpora": {"a": {"src_lang": "en", "tgt_lang": "de", "tag": "2de"},
                        "b": {"src_lang": "de", "tgt_lang": "en", "tag": "2en"}, "toy": {"mode": "copy"}}}
    assert directions(data) == {("en", "de"): "2de", ("de", "en"): "2en"}
    assert directions({"corpus": {"src_lang": "en", "tgt_lang": "de"}}) == {("en", "de"): None}


def test_languages_list_each_source_with_its_targets_and_the_first_model_takes_a_pair():
    assert BOTH.languages() == [{"code": "de", "name": "German", "targets": ["en"]},
                                {"code": "en", "name": "English", "targets": ["de", "fr"]}]
    assert BOTH.pick("en", "de", ["a"], ("source", "target")) == ("both", "2de", "en", None)
    assert BOTH.pick("en", "fr", ["a"], ("source", "target")) == ("fr", None, "en", None)


def test_auto_identifies_the_source_among_those_that_reach_the_target():
    model, tag, source, confidence = BOTH.pick("auto", "en", ["Ein Mann fährt mit dem Fahrrad die Straße hinunter."],
                                               ("source", "target"))
    assert (model, tag, source, confidence) == ("both", "2en", "de", 100.0)  # de alone reaches en
    model, tag, source, confidence = BOTH.pick(None, "de", ["A man rides a bicycle down the street."],
                                               ("source_language", "target_language"))
    assert (model, tag, source) == ("both", "2de", "en") and confidence == 100.0
    into_de = Directions({"en": served("en", {("en", "de"): None}), "fr": served("fr", {("fr", "de"): None})})
    model, _, source, confidence = into_de.pick("auto", "de", ["Un homme descend la rue à vélo."], ("s", "t"))
    assert (model, source) == ("fr", "fr") and 50 < confidence <= 100  # identified between en and fr
    model, _, source, _ = into_de.pick("auto", "de", ["A man rides a bicycle down the street."], ("s", "t"))
    assert (model, source) == ("en", "en")


@pytest.mark.parametrize(("source", "target", "field", "start"), [
    ("en", "ja", "target", "target=ja: no served model translates into it (the directions: en-de, de-en, en-fr)"),
    ("de", "fr", "source", "source=de: no served model translates it into fr"),
])
def test_a_pair_no_model_serves_is_one_line_naming_the_key(source, target, field, start):
    with pytest.raises(RequestError) as err:
        BOTH.pick(source, target, ["a"], ("source", "target"))
    assert err.value.field == field and err.value.status == 400 and str(err.value).startswith(start)


def test_a_multilingual_models_codes_are_its_directions_each_forcing_its_target_code():
    """An M2M-100 folder served (no corpora, language codes): every pair of the languages its codes
    name, the source code its tag and the target code forced; a corpus pair of a fine-tuned one
    forces its target language's code too; the corpora's pairs come first."""
    m2m = Directions({"m2m": served("m2m", {}, ("__en__", "__de__", "__fr__", "__xx__")),
                      "tuned": served("tuned", {("en", "de"): "__en__"}, ("__en__", "__de__"))})
    assert [(entry["code"], entry["targets"]) for entry in m2m.languages()] == [
        ("de", ["en", "fr"]), ("en", ["de", "fr"]), ("fr", ["de", "en"])]
    assert m2m.pick("de", "fr", ["a"], ("s", "t")) == ("m2m", "__de__", "de", None)
    assert m2m.target_code("de", "fr") == "__fr__"
    assert m2m.pick("en", "de", ["a"], ("s", "t")) == ("m2m", "__en__", "en", None)  # the first model's
    tuned = Directions({"tuned": served("tuned", {("en", "de"): "__en__"}, ("__en__", "__de__"))})
    assert tuned.target_code("en", "de") == "__de__" and tuned.pick("de", "en", ["a"], ("s", "t"))[:2] == \
        ("tuned", "__de__")
