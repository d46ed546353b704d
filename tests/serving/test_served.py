"""What a served model knows of its training data: the target language of each source tag (only
when its corpora have several), and the off-target flag of outputs in another of those languages."""

from transformer_mt.serving.served import ServedModel, target_languages

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
