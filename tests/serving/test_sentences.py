"""A text split into sentences by sentencex and put back together (serving/sentences.py): each
sentence stripped, the whitespace between them (line breaks too) kept around the translations."""

from transformer_mt.serving.sentences import Split


def test_sentences_come_back_with_the_texts_whitespace():
    texts = ["A man rides.  Two dogs play!\nThe end. ", "", "  One sentence."]
    split = Split.of(texts, "en")
    assert split.sentences == ["A man rides.", "Two dogs play!", "The end.", "", "One sentence."]
    assert split.counts == [3, 1, 1]
    assert split.joined([s.upper() for s in split.sentences]) == ["A MAN RIDES.  TWO DOGS PLAY!\nTHE END. ", "",
                                                                   "  ONE SENTENCE."]


def test_the_source_languages_rules_split_it():
    """German abbreviations (Dr., z. B.) end no sentence; a text of one sentence is itself."""
    split = Split.of(["Dr. Müller kommt um drei Uhr, z. B. heute. Dann geht er."], "de")
    assert split.sentences == ["Dr. Müller kommt um drei Uhr, z. B. heute.", "Dann geht er."]
    assert Split.of(["A man is riding a bicycle."], "en").sentences == ["A man is riding a bicycle."]
