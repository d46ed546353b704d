"""Vocabularies: BPE and sentencepiece, joint and separate, user files, exact detokenization."""

import base64
import json

import pytest

from tests.helpers import schema_refusal
from transformer_mt.data.corpus import ParallelText
from transformer_mt.data.tokenizer import (
    SPECIAL_TOKENS,
    BpeTokenizer,
    MarianVocabulary,
    SentencePieceTokenizer,
    TextTokenizer,
    TokenizerOptions,
    Vocabularies,
)
from transformer_mt.data.vocabulary_training import (
    build_vocabularies,
    cached_vocabularies,
    train_bpe,
    train_sentencepiece,
)
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


@pytest.mark.parametrize("options", [TokenizerOptions(type="bpe", vocab_size=300),
                                     TokenizerOptions(type="bpe", joint=False, vocab_size=200),
                                     TokenizerOptions(type="sentencepiece", vocab_size=150)])
def test_a_cached_vocabulary_is_trained_on_the_sample_it_lets_go_of(options, tmp_path):
    """cached_vocabularies hands the trainer the sample's lines as it drops them (the text is not
    held at the trainer's peak): the vocabulary is the one the whole lists give."""
    sample = ParallelText(list(EN), list(DE))
    cached = cached_vocabularies(tmp_path / "entry", options, lambda: sample, [], progress=False)
    assert cached.same_as(build_vocabularies(EN, DE, options))
    assert set(sample.src) == set(sample.tgt) == {None}  # let go of, line by line


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


# ------------------------------------------------------------------- one interface, three classes
def opus_like(sentencepiece: TextTokenizer) -> MarianVocabulary:
    """A Marian vocabulary numbered as OPUS-MT's: </s> 0, <unk> 1, the other pieces, <pad> last."""
    pieces = [p for p in sentencepiece.tokens(list(range(sentencepiece.vocab_size))) if p not in SPECIAL_TOKENS]
    return MarianVocabulary(sentencepiece.sentencepiece_model(), ["</s>", "<unk>", *pieces, "<pad>"])


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, TextTokenizer]:
    sentencepiece = train_sentencepiece(EN + DE, TokenizerOptions(type="sentencepiece", vocab_size=150))
    return {"bpe": train_bpe(EN + DE, TokenizerOptions(vocab_size=300)), "sentencepiece": sentencepiece,
            "marian": opus_like(sentencepiece)}


CLASSES = {"bpe": (BpeTokenizer, "tokenizers"), "sentencepiece": (SentencePieceTokenizer, "sentencepiece"),
           "marian": (MarianVocabulary, "marian")}


def observe(tokenizer: TextTokenizer, folder) -> dict:
    """Everything a caller can see through the interface (the stored kind aside)."""
    lines = EN[:4] + DE[:4] + ["ünknöwn ☃ text"]
    ids = tokenizer.encode(lines)
    special = list(tokenizer.special_ids.values())
    tokenizer.save(folder / f"saved{tokenizer.suffix}")
    return {"special_ids": tokenizer.special_ids, "vocab_size": tokenizer.vocab_size, "ids": ids,
            "text": tokenizer.decode([special + seq + special for seq in ids]),
            "tokens": tokenizer.tokens(list(range(tokenizer.vocab_size))),
            "token_id": [tokenizer.token_id(t) for t in [*SPECIAL_TOKENS, "▁A", "▁Ein", "never-a-piece"]],
            "sentencepiece_model": tokenizer.sentencepiece_model(), "suffix": tokenizer.suffix,
            "data": tokenizer.to_dict()["data"], "file": (folder / f"saved{tokenizer.suffix}").read_bytes()}


@pytest.mark.parametrize("name", list(CLASSES))
def test_each_class_round_trips_through_its_dict_and_its_file(tokenizers, name, tmp_path):
    tokenizer, (cls, kind) = tokenizers[name], CLASSES[name]
    assert type(tokenizer) is cls and tokenizer.kind == kind
    # the stored format: {"kind", "data"}, data being the file's text (sentencepiece: the model in base64)
    stored = tokenizer.to_dict()
    assert set(stored) == {"kind", "data"} and stored["kind"] == kind and isinstance(stored["data"], str)
    tokenizer.save(tmp_path / f"first{tokenizer.suffix}")
    written = (tmp_path / f"first{tokenizer.suffix}").read_bytes()
    assert written == (base64.b64decode(stored["data"]) if name == "sentencepiece" else stored["data"].encode())
    if name == "marian":
        assert set(json.loads(written)["marian"]) == {"spm", "pieces"}
    seen = observe(tokenizer, tmp_path)
    for again in (TextTokenizer.from_dict(stored), TextTokenizer.load(tmp_path / f"first{tokenizer.suffix}")):
        assert type(again) is cls and again.to_dict() == stored
        assert observe(again, tmp_path) == seen  # same ids, same text, and a byte-identical file


@pytest.mark.parametrize("name", list(CLASSES))
def test_no_behaviour_depends_on_the_kind_string(tokenizers, name, tmp_path):
    """Only the stored "kind" names the class: a copy told another kind behaves the same in everything
    else, and its round trip gives the same class (chosen by the stored kind or the file's content)."""
    tokenizer = tokenizers[name]
    renamed = TextTokenizer.from_dict(tokenizer.to_dict())
    renamed.kind = "something else"
    assert observe(renamed, tmp_path) == observe(tokenizer, tmp_path)
    assert type(TextTokenizer.load(tmp_path / f"saved{renamed.suffix}")) is type(tokenizer)


@pytest.mark.parametrize("name", list(CLASSES))
def test_hugging_face_export_does_not_depend_on_the_kind_string(tokenizers, name, tmp_path):
    pytest.importorskip("transformers", reason="the export extra: pip install -e '.[export]'")
    from transformer_mt.interop.hf_tokenizer import save_hugging_face

    tokenizer = tokenizers[name]
    renamed = TextTokenizer.from_dict(tokenizer.to_dict())
    renamed.kind = "something else"
    save_hugging_face(tokenizer, tokenizer, tmp_path / "original", 64)
    save_hugging_face(renamed, renamed, tmp_path / "renamed", 64)
    files = sorted(p.name for p in (tmp_path / "original").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "renamed").iterdir())
    assert files == (["tokenizer.json", "tokenizer_config.json"] if name == "bpe"
                     else ["source.spm", "target.spm", "tokenizer_config.json", "vocab.json"])
    for file in files:
        assert (tmp_path / "original" / file).read_bytes() == (tmp_path / "renamed" / file).read_bytes(), file


def test_a_marian_vocabulary_has_no_bos_and_keeps_its_numbering(tokenizers):
    marian = tokenizers["marian"]
    assert marian.special_ids == {"pad_id": marian.vocab_size - 1, "bos_id": marian.vocab_size - 1, "eos_id": 0,
                                  "unk_id": 1}
    assert marian.decode(marian.encode(EN[:2])) == tokenizers["sentencepiece"].decode(
        tokenizers["sentencepiece"].encode(EN[:2]))
    vocab = Vocabularies(marian, opus_like(tokenizers["sentencepiece"]))
    assert not vocab.joint and Vocabularies.from_dict(vocab.to_dict()).same_as(vocab)


@pytest.mark.parametrize("value", [4, 0, -1, True, 3.5, 8000.0, "8000", None])
def test_vocab_size_must_be_an_integer_of_at_least_5(tmp_path, value):
    assert schema_refusal(tmp_path, "data.tokenizer.vocab_size", value) == \
        f"data.tokenizer.vocab_size={value!r}: must be an integer >= 5"


@pytest.mark.parametrize(("key", "value", "message"), [
    ("type", "wordpiece", "data.tokenizer.type='wordpiece': must be bpe or sentencepiece"),
    ("model_type", "char", "data.tokenizer.model_type='char': must be unigram or bpe"),
    ("normalization", "nfc", "data.tokenizer.normalization='nfc': must be nfkc or none"),
    ("tgt_file", "x.json", "data.tokenizer.tgt_file='x.json': needs data.tokenizer.joint=false"),
])
def test_each_bad_option_is_named_with_its_value(tmp_path, key, value, message):
    assert schema_refusal(tmp_path, f"data.tokenizer.{key}", value) == message


def test_a_tokenizer_of_an_unknown_kind_is_an_error_naming_it(tokenizers):
    """A checkpoint's tokenizer whose kind this version does not know is not read as sentencepiece."""
    data = tokenizers["sentencepiece"].to_dict()
    assert type(TextTokenizer.from_dict(data)) is SentencePieceTokenizer
    with pytest.raises(DataError, match=r"a tokenizer of kind 'wordpiece': not one this version reads "
                                        r"\(tokenizers, sentencepiece, marian\)"):
        Vocabularies.from_dict({"src": {**data, "kind": "wordpiece"}, "tgt": None})
