"""What a served model knows of its training data: the target language of each source tag (only
when its corpora have several), and the off-target flag of outputs in another of those languages;
the search a request gets, by what the configured search declares (decoding/strategy.py)."""

from types import SimpleNamespace

import pytest

from transformer_mt.decoding import BeamSearch, GreedySearch, PowerLength, Sampling
from transformer_mt.inference.translator import Translator
from transformer_mt.serving.api import Limits, RequestError, TranslateRequest
from transformer_mt.serving.served import ServedModel, target_languages

LIMITS = Limits()

BOTH = {"corpus": {"_target_": "x.TextFileCorpus", "src_lang": "en", "tgt_lang": "de", "tag": "to_de"},
        "corpora": {"back": {"_target_": "x.TextFileCorpus", "src_lang": "de", "tgt_lang": "en", "tag": "to_en"}}}


def test_tags_name_their_target_language_when_the_corpora_have_several():
    assert target_languages(BOTH) == {"to_de": "de", "to_en": "en"}
    one = {"corpus": {"tgt_lang": "de"}, "corpora": {"more": {"tgt_lang": "de", "tag": "bt"}}}
    assert target_languages(one) == {} and target_languages({"corpus": {"_target_": "x.Toy"}}) == {}


def test_an_output_in_the_other_language_is_flagged_off_target():
    served = ServedModel("both", translator=None, paths=[], languages=target_languages(BOTH))
    outputs = ["Ein Mann fährt mit dem Fahrrad die Straße entlang.", "A man is riding a bicycle down the street.", ""]
    assert served.off_target(outputs, "de") == [False, True, False]  # an empty line is in no language
    assert served.off_target(outputs, "en") == [True, False, False]
    assert served.off_target(outputs, None) == [None, None, None]  # no language to check against


@pytest.mark.parametrize(("code", "language"), [("__de__", "de"), ("deu_Latn", "de"), ("zho_Hant", "zh"),
                                                ("ace_Latn", "ace"), ("__xx__", None), ("<2de>", None)])
def test_a_language_code_names_the_language_its_outputs_should_be_in(code, language):
    """M2M-100's and NLLB's codes as py3langid names their languages (ace: its own code); a code of
    neither form, or a language it does not know: none."""
    from transformer_mt.evaluation.off_target import code_language

    assert code_language(code) == language


def test_a_runs_corpora_are_scored_in_their_target_codes_languages():
    """Training's off-target scoring (TranslationModule.target_languages): corpora whose target tags
    are language codes are scored in those languages, whatever their files' suffixes; one language
    for all, or one py3langid does not know: none."""
    from transformer_mt.evaluation.off_target import scored_languages

    assert scored_languages({"a": None, "b": None}, {"a": "deu_Latn", "b": "__fr__"}) == {"a": "de", "b": "fr"}
    assert scored_languages({"a": "x", "b": "en"}, {"a": "__de__"}) == {"a": "de", "b": "en"}
    assert scored_languages({"a": "x", "b": "en"}, {}) == {}  # x: unknown to py3langid
    assert scored_languages({"a": "de", "b": "en"}, {}) == {"a": "de", "b": "en"}
    assert scored_languages({"a": None, "b": None}, {"a": "__de__", "b": "deu_Latn"}) == {}


def test_outputs_off_the_requested_target_code_are_flagged_among_the_models_codes():
    """A model without tagged corpora (an M2M-100 folder) but with language codes: a request's target
    code (its first forced id) names the language, its other codes the candidates."""
    tokens = {7: "__de__", 8: "__fr__", 9: "__en__"}
    tokenizer = SimpleNamespace(tgt=SimpleNamespace(tokens=lambda ids: [tokens[i] for i in ids]))
    served = ServedModel("m2m", translator=SimpleNamespace(tokenizer=tokenizer), paths=[],
                         codes=("__de__", "__fr__", "__en__", "__xx__"))
    assert served.target_language(None, (7,)) == "de" and served.target_language(None, ()) is None
    outputs = ["Ein Mann fährt mit dem Fahrrad die Straße entlang.", "Un homme fait du vélo dans la rue."]
    assert served.off_target(outputs, served.target_language(None, (8,))) == [True, False]


def served_with(search) -> ServedModel:
    """A served model whose configured decoding is `search`, decoded by ours (all that choosing a
    request's search reads)."""
    return ServedModel("toy", translator=SimpleNamespace(search=search, capabilities=Translator.capabilities), paths=[])


def test_a_requests_search_follows_what_the_configured_search_declares():
    beam, greedy, sampling = BeamSearch(5, PowerLength(0.6)), GreedySearch(), Sampling(nbest=2)
    assert served_with(beam).search(TranslateRequest(text="a"), LIMITS) == (("beam", 5, 1, PowerLength(0.6)), beam)
    key, other = served_with(beam).search(TranslateRequest(text="a", search="greedy"), LIMITS)
    assert key == ("greedy",) and isinstance(other, GreedySearch) and other.options is beam.options
    assert served_with(greedy).search(TranslateRequest(text="a"), LIMITS) == (("greedy",), greedy)
    key, other = served_with(greedy).search(TranslateRequest(text="a", nbest=2), LIMITS)
    assert key == ("beam", 4, 2, PowerLength()) and (other.beam_size, other.nbest) == (4, 2)
    assert served_with(sampling).search(TranslateRequest(text="a"), LIMITS) == (("configured",), sampling)
    with pytest.raises(RequestError, match="this model samples"):
        served_with(sampling).search(TranslateRequest(text="a"), LIMITS, constrained=True)
    with pytest.raises(RequestError, match="constraints need beam search"):
        served_with(beam).search(TranslateRequest(text="a", search="greedy"), LIMITS, constrained=True)
    with pytest.raises(RequestError, match="constraints need beam search"):
        served_with(greedy).search(TranslateRequest(text="a"), LIMITS, constrained=True)
    assert served_with(greedy).search(TranslateRequest(text="a", search="beam"), LIMITS, constrained=True)[0][0] == \
        "beam"


def test_a_requests_lines_are_tokenized_once_and_decode_as_task_translate_tokenizes_them(monkeypatch):
    """The server tokenizes a request's lines as it arrives (their budget in a batch) and decodes
    those ids: one call of the tokenizer a request, and the translations of encoding them again."""
    from tests.helpers import ROOT
    from transformer_mt.decoding import GreedySearch
    from transformer_mt.inference.line_translation import translate_lines
    from transformer_mt.serving.app import Settings, batched
    from transformer_mt.serving.decode import decode_jobs

    served = ServedModel.load("default", [ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"], GreedySearch(),
                              "none", None)
    tokenizer, calls = served.translator.tokenizer, []
    encode = tokenizer.encode_sources
    monkeypatch.setattr(tokenizer, "encode_sources", lambda *args: calls.append(args) or encode(*args))
    lines = ["A man is riding a bicycle.", "", "Two dogs are playing in the snow."]
    [answer] = decode_jobs([batched(TranslateRequest(text=lines), served, Settings())])
    assert len(calls) == 1
    again = translate_lines(served.translator, lines, 4096, name="text", source_prefix=[])  # encoding them again
    assert len(calls) == 2 and [n[0].text for n in answer.nbests] == [n[0].text for n in again]
    assert answer.nbests[1][0].text == "" and answer.nbests[0][0].text


def test_requests_in_two_directions_decode_in_one_batch_each_row_with_its_tag(monkeypatch):
    """The tag is its row's first source token, not part of the batch key: a both-directions model's
    requests for either direction share a batch, and each is checked off target in its own language."""
    from transformer_mt.serving import decode
    from transformer_mt.serving.app import Settings, batched
    from transformer_mt.serving.decode import decode_jobs

    checked = []
    both = SimpleNamespace(
        name="both", languages={"2de": "de", "2en": "en"}, tag_of=lambda asked, source_lang=None: asked,
        target_language=lambda tag, code: {"2de": "de", "2en": "en"}[tag],
        target_prefix=lambda code: (),
        refuse_unsupported=lambda constrained, alignments: None,
        decoder=SimpleNamespace(capabilities=Translator.capabilities, with_search=lambda search: "engine"),
        search=lambda body, limits, constrained=False: (("greedy",), "a greedy search"),
        source_prefix=lambda tag: [{"2de": 5, "2en": 6}[tag]],
        source_ids=lambda lines, prefix: [[*prefix, 9, 2] for _ in lines],
        off_target=lambda outputs, language: checked.append((outputs, language)) or [False] * len(outputs))
    jobs = [batched(TranslateRequest(text="a", tag=tag), both, Settings()) for tag in ("2de", "2en")]
    assert jobs[0].key == jobs[1].key and [job.payload.sources for job in jobs] == [([5, 9, 2],), ([6, 9, 2],)]
    seen = {}

    def translated(engine, lines, max_tokens, **options):
        seen.update(options)
        return [[SimpleNamespace(text=f"out {ids[0]}")] for ids in options["encoded"]]

    monkeypatch.setattr(decode, "translate_lines", translated)
    answers = decode_jobs(jobs)
    assert seen["encoded"] == [[5, 9, 2], [6, 9, 2]]  # one call, both directions, each row its tag
    assert [a.nbests[0][0].text for a in answers] == ["out 5", "out 6"]
    assert checked == [(["out 5"], "de"), (["out 6"], "en")]


def test_a_sentence_longer_than_the_model_takes_is_cut_between_words_into_pieces_that_fit():
    from tests.helpers import ROOT
    from transformer_mt.decoding import GreedySearch

    served = ServedModel.load("default", [ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"], GreedySearch(),
                              "none", None)
    limit, tokenizer = served.translator.max_positions, served.translator.tokenizer
    long = " ".join(f"a cat number {i}" for i in range(400))  # over 512 tokens
    pieces = served.pieces(long, [])
    assert len(pieces) >= 2 and " ".join(pieces) == long  # cut between words, none lost
    assert all(len(ids) < limit for ids in tokenizer.encode_sources(pieces))
    assert len(tokenizer.encode_sources([" ".join(pieces[:2])])[0]) >= limit  # no fewer pieces would fit
    assert served.pieces("A man is riding a bicycle.", []) == ["A man is riding a bicycle."]
