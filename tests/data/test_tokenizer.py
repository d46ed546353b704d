"""Vocabularies: BPE and sentencepiece, joint and separate, user files, exact detokenization."""

import pytest

from transformer_mt.data.tokenizer import TextTokenizer, TokenizerOptions, Vocabularies, build_vocabularies
from transformer_mt.errors import ConfigError, DataError

EN = ["Two young, White males are outside near many bushes.", "A little girl climbing into a wooden playhouse.",
      "Several men in hard hats are operating a giant pulley system.", "A man in a blue shirt is standing."] * 25
DE = ["Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
      "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
      "Mehrere Männer mit Schutzhelmen bedienen ein Antriebsradsystem.", "Ein Mann in einem blauen Hemd steht."] * 25


@pytest.mark.parametrize("options", [
    TokenizerOptions(type="bpe", vocab_size=300),
    TokenizerOptions(type="sentencepiece", model_type="unigram", vocab_size=150),
    TokenizerOptions(type="sentencepiece", model_type="bpe", vocab_size=150),
])
def test_round_trip_restores_the_text(options, tmp_path):
    vocab = build_vocabularies(EN, DE, options)
    assert vocab.joint and vocab.special_ids() == {"pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}
    for side, lines in ((vocab.src, EN[:4]), (vocab.tgt, DE[:4])):
        assert side.decode(side.encode(lines)) == lines
    # serialization for checkpoints and files keeps every id
    again = Vocabularies.from_dict(vocab.to_dict())
    assert again.src.encode(DE[:4]) == vocab.src.encode(DE[:4])
    vocab.save(tmp_path)
    assert Vocabularies.load(tmp_path).same_as(vocab)


def test_separate_vocabularies():
    vocab = build_vocabularies(EN, DE, TokenizerOptions(joint=False, vocab_size=200))
    assert not vocab.joint and vocab.src is not vocab.tgt
    assert "Mädchen" not in vocab.src.model.get_vocab() and "▁Mädchen" in vocab.tgt.model.get_vocab()
    assert vocab.tgt.decode(vocab.tgt.encode(DE[:2])) == DE[:2]


def test_whitespace_rule_and_lowercase():
    vocab = build_vocabularies(EN, DE, TokenizerOptions(vocab_size=300, lowercase=True))
    assert vocab.src.decode(vocab.src.encode(["  A little   Girl. "])) == ["a little girl."]


@pytest.mark.parametrize("kind", ["bpe", "sentencepiece"])
def test_smaller_vocabulary_than_asked_is_warned_with_both_numbers(kind, caplog):
    vocab = build_vocabularies(EN[:4], DE[:4], TokenizerOptions(type=kind, vocab_size=5000))
    got = vocab.src.vocab_size
    assert got < 5000
    assert f"vocabulary has {got} tokens, fewer than the 5000 asked for" in caplog.text


def test_user_supplied_files(tmp_path):
    trained = build_vocabularies(EN, DE, TokenizerOptions(type="sentencepiece", vocab_size=150))
    trained.src.save(tmp_path / "spm.model")
    loaded = build_vocabularies([], [], TokenizerOptions(file=str(tmp_path / "spm.model")))
    assert loaded.same_as(trained)
    (tmp_path / "bad.json").write_text('{"not": "a tokenizer"}')
    with pytest.raises(DataError, match=r"bad\.json: not a valid tokenizers JSON file"):
        TextTokenizer.load(tmp_path / "bad.json")
    with pytest.raises(DataError, match="no such tokenizer file"):
        TextTokenizer.load(tmp_path / "missing.json")


def test_bad_options_name_the_key():
    with pytest.raises(ConfigError, match="data.tokenizer.type"):
        TokenizerOptions(type="wordpiece")
    with pytest.raises(ConfigError, match="data.tokenizer.tgt_file"):
        TokenizerOptions(tgt_file="x.json")


@pytest.mark.parametrize("kind", ["bpe", "sentencepiece"])
def test_larger_vocabulary_than_asked_is_warned_with_both_numbers(kind, caplog):
    if kind == "bpe":
        vocab = build_vocabularies(EN, DE, TokenizerOptions(type="bpe", vocab_size=5))
        got = vocab.src.vocab_size
        assert got > 5
        assert f"data.tokenizer.vocab_size=5, but the vocabulary has {got} tokens" in caplog.text
        assert [r.levelname for r in caplog.records if "vocab_size=5" in r.getMessage()] == ["WARNING"]
    else:
        # sentencepiece refuses a size below its alphabet: a ConfigError naming the key
        with pytest.raises(ConfigError) as err:
            build_vocabularies(EN, DE, TokenizerOptions(type="sentencepiece", vocab_size=5))
        message = str(err.value)
        assert message.startswith("data.tokenizer.vocab_size=5 is rejected by sentencepiece: ")
        assert "need at least " in message and "data.tokenizer.character_coverage" in message


def test_exact_vocabulary_size_is_not_warned(caplog):
    vocab = build_vocabularies(EN, DE, TokenizerOptions(type="bpe", vocab_size=120))
    assert vocab.src.vocab_size == 120
    assert "data.tokenizer.vocab_size" not in caplog.text
