"""The words of subword tokens (word alignments count them), and outputs that start with a target
prefix as given (task.prefix), with the tokenizers this project trains."""

import pytest

from transformer_mt.data.tokenizer import TextTokenizer, TokenizerOptions
from transformer_mt.data.vocabulary_training import train_bpe, train_sentencepiece
from transformer_mt.data.words import decoded_words, source_words, token_words
from transformer_mt.inference.prefix import restore_prefix, spell

LINES = ["Two young, White males are outside near many bushes.", "A little girl climbing into a wooden playhouse.",
         "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
         "Ein kleines Mädchen klettert in ein Spielhaus aus Holz."] * 25


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, TextTokenizer]:
    return {"bpe": train_bpe(LINES, TokenizerOptions(vocab_size=120)),
            "sentencepiece": train_sentencepiece(LINES, TokenizerOptions(type="sentencepiece", vocab_size=100))}


def test_token_words_from_the_text_up_to_each_token():
    # ▁no ▁young ▁ g ar den .  (a word-start mark alone begins the next word)
    texts = ["no", "no young", "no young ", "no young g", "no young gar", "no young garden", "no young garden."]
    assert token_words(texts) == [0, 1, 2, 2, 2, 2, 2]
    assert token_words(["", "o", "o ", "o nd"]) == [0, 0, 1, 1]  # <unk> <unk>o ▁ nd: nothing shown joins
    assert token_words(["a", "a "]) == [0, 0]  # a trailing mark stays within the words there are
    assert token_words([]) == []


@pytest.mark.parametrize("name", ["bpe", "sentencepiece"])
def test_each_token_gets_the_word_it_spells(tokenizers, name):
    tokenizer = tokenizers[name]
    lines = LINES[:4]
    ids = tokenizer.encode(lines)
    for line, words in zip(lines, source_words(tokenizer, lines, ids)):
        assert words == sorted(words) and words[-1] == len(line.split()) - 1
    for line, sequence, words in zip(lines, ids, decoded_words(tokenizer, ids)):
        spelled = [tokenizer.decode([[t for t, w in zip(sequence, words) if w == i]])[0] for i in set(words)]
        assert spelled == line.split()  # the tokens of word i decode to word i


def test_words_the_vocabulary_cannot_spell_keep_their_place(tokenizers):
    """BPE decoding drops <unk>: a word of unknown characters only vanishes from the decoded text,
    so source words come from the words encoded one by one."""
    tokenizer = tokenizers["bpe"]
    line = "Two ☃☃ males are 😀 near bushes."
    ids = tokenizer.encode([line])
    words = source_words(tokenizer, [line], ids)[0]
    unk = tokenizer.special_ids["unk_id"]
    assert [w for t, w in zip(ids[0], words) if t == unk] and {w for t, w in zip(ids[0], words) if t == unk} == {1, 4}
    assert words[-1] == 6
    assert decoded_words(tokenizer, ids)[0][-1] == 4  # what the decoded text alone would say


@pytest.mark.parametrize("name", ["bpe", "sentencepiece"])
def test_the_forced_tokens_text_starts_every_continuation(tokenizers, name):
    """restore_prefix relies on it: decode(prefix + rest) starts with decode(prefix), for prefixes
    ending anywhere (inside a word, after a space mark) and continuations of any tokens."""
    tokenizer = tokenizers[name]
    for sequence in tokenizer.encode(LINES[:4]):
        for cut in range(len(sequence) + 1):
            head, whole = tokenizer.decode([sequence[:cut], sequence])
            assert whole.startswith(head)


def test_the_output_starts_with_the_prefix_as_given(tokenizers):
    tokenizer = tokenizers["bpe"]
    prefix = "ZWEI ☃ junge"  # capitals and a snowman the vocabulary lacks: decoded otherwise
    forced = tokenizer.encode([prefix])[0]
    output = forced + tokenizer.encode(["Männer sind im Freien."])[0]
    shown = tokenizer.decode([forced])[0]
    assert shown != prefix
    assert spell(tokenizer, [output], [prefix], [len(forced)]) == ["ZWEI ☃ junge Männer sind im Freien."]
    assert spell(tokenizer, [output], [""], [0]) == tokenizer.decode([output])  # no prefix: as decoded
    assert spell(tokenizer, [forced[:2]], [prefix], [len(forced)]) == tokenizer.decode([forced[:2]])  # a part
    assert restore_prefix("Der Hu", "Der Hund läuft", "Der Hu", "nd läuft") == "Der Hund läuft"
    assert restore_prefix("X", "a b", "c", "b") == "X b"  # decoding that does not keep the start: prefix, rest
