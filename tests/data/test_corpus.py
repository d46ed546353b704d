"""Reading parallel files: clear errors, the whitespace rule, the toy corpus."""

import pytest

from transformer_mt.data.corpus import TableCorpus, TextFileCorpus, clean, read_lines
from transformer_mt.data.toy import ADJECTIVES, NOUNS, VERBS, ToyCorpus
from transformer_mt.errors import DataError


def write(path, text: str | bytes) -> None:
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


def test_reads_aligned_files_and_applies_the_whitespace_rule(tmp_path):
    write(tmp_path / "train.en", "a  b \n c\n\nd\n")
    write(tmp_path / "train.de", "x\ny\tz\nw\n\n")
    text = TextFileCorpus(str(tmp_path), "en", "de").load("train")
    assert text.src == ["a b", "c"] and text.tgt == ["x", "y z"]
    assert text.stats == {"pairs": 4, "whitespace_fixed": 3, "empty_dropped": 2}


def test_validation_and_test_are_never_filtered(tmp_path):
    write(tmp_path / "val.en", "a\n\nc\n")
    write(tmp_path / "val.de", "x\ny\n\n")
    text = TextFileCorpus(str(tmp_path), "en", "de").load("val")
    assert text.src == ["a", "", "c"] and text.tgt == ["x", "y", ""]


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(DataError, match=r"train\.en: no such file"):
        TextFileCorpus(str(tmp_path), "en", "de").load("train")


def test_misaligned_files_name_both_files_and_counts(tmp_path):
    write(tmp_path / "train.en", "a\nb\nc\n")
    write(tmp_path / "train.de", "x\ny\n")
    with pytest.raises(DataError, match=r"train\.en has 3 lines but .*train\.de has 2"):
        TextFileCorpus(str(tmp_path), "en", "de").load("train")


def test_invalid_utf8_names_file_and_line(tmp_path):
    write(tmp_path / "bad.txt", b"ok\nfine\nbad \xff byte\n")
    with pytest.raises(DataError, match=r"bad\.txt:3: invalid UTF-8"):
        read_lines(tmp_path / "bad.txt")


def test_line_endings():
    assert clean(["  a\t b  ", "c"]) == (["a b", "c"], 1)


def test_toy_corpus_is_deterministic_disjoint_and_a_real_transduction():
    a, b = ToyCorpus(num_train=500, num_val=50, num_test=50), ToyCorpus(num_train=500, num_val=50, num_test=50)
    train, val, test = a.load("train"), a.load("val"), a.load("test")
    assert train.src == b.load("train").src and train.tgt == b.load("train").tgt
    assert not set(train.src) & set(val.src) and not set(train.src) & set(test.src) and not set(val.src) & set(test.src)
    # target words are a vocabulary mapping, and the verb moves to the end of its clause
    src_words = set(NOUNS) | set(ADJECTIVES) | set(VERBS)
    assert not any(w in src_words for line in train.tgt for w in line.split())
    assert sum(line.split()[-1] in VERBS.values() for line in train.tgt) == len(train)
    copy = ToyCorpus(mode="copy", num_train=20, num_val=5, num_test=5).load("train")
    assert copy.src == copy.tgt


def test_tsv_with_named_columns(tmp_path):
    write(tmp_path / "train.tsv", "id\ten\tde\n1\ta  cat\teine Katze\n2\tthe dog\tder Hund\n")
    corpus = TableCorpus(str(tmp_path), "en", "de", {"train": "train.tsv"})
    text = corpus.load("train")
    assert text.src == ["a cat", "the dog"] and text.tgt == ["eine Katze", "der Hund"]
    write(tmp_path / "bad.tsv", "en\tde\na\tb\nc\n")
    with pytest.raises(DataError, match=r"bad\.tsv:3: 1 fields, the header has 2"):
        TableCorpus(str(tmp_path), "en", "de", {"train": "bad.tsv"}).load("train")
    with pytest.raises(DataError, match=r"train\.tsv:1: no column 'fr'"):
        TableCorpus(str(tmp_path), "en", "fr", {"train": "train.tsv"}).load("train")


def test_jsonl_with_nested_fields(tmp_path):
    write(tmp_path / "val.jsonl", '{"translation": {"en": "a cat", "de": "eine Katze"}}\n'
                                  '{"translation": {"en": "", "de": "leer"}}\n')
    corpus = TableCorpus(str(tmp_path), "translation.en", "translation.de", {"val": "val.jsonl"})
    assert corpus.load("val").src == ["a cat", ""]  # validation is never filtered
    write(tmp_path / "bad.jsonl", '{"en": "a", "de": "b"}\n{"en": "a", "de": \n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: invalid JSON"):
        TableCorpus(str(tmp_path), "en", "de", {"val": "bad.jsonl"}).load("val")
    write(tmp_path / "num.jsonl", '{"en": "a", "de": 3}\n')
    with pytest.raises(DataError, match=r"num\.jsonl:1: field 'de' is not a string"):
        TableCorpus(str(tmp_path), "en", "de", {"val": "num.jsonl"}).load("val")


def test_fingerprints_follow_the_content(tmp_path):
    write(tmp_path / "train.en", "a\n")
    write(tmp_path / "train.de", "b\n")
    corpus = TextFileCorpus(str(tmp_path), "en", "de")
    before = corpus.fingerprint("train")
    assert corpus.fingerprint("train") == before
    write(tmp_path / "train.de", "c\n")
    assert corpus.fingerprint("train") != before
    assert TextFileCorpus(str(tmp_path), "de", "en").fingerprint("train") != corpus.fingerprint("train")
