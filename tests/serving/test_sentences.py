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


def test_a_sentence_cut_to_fit_comes_back_joined_by_a_space_and_is_counted():
    def halves(sentence: str) -> list[str]:
        words = sentence.split()
        return [sentence] if len(words) < 6 else [" ".join(words[:3]), " ".join(words[3:6]), " ".join(words[6:])]

    split = Split.of(["Short one.\nOne two three four five six seven eight.", "Fine."], "en", halves)
    assert split.sentences == ["Short one.", "One two three", "four five six", "seven eight.", "Fine."]
    assert split.cut == {0: 1} and split.counts == [4, 1]
    assert split.joined([s.upper() for s in split.sentences]) == [
        "SHORT ONE.\nONE TWO THREE FOUR FIVE SIX SEVEN EIGHT.", "FINE."]
