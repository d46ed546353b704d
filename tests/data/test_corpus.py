"""Reading parallel files: clear errors, the whitespace rule, the toy corpus."""

import pytest

from transformer_mt.data.corpus import TableCorpus, TextFileCorpus, read_lines
from transformer_mt.data.text import clean
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


def test_invisible_format_characters_at_the_edges_are_stripped_inside_words_kept():
    zwsp, bom, zwnj, zwj = "\u200b", "\ufeff", "\u200c", "\u200d"
    lines = [zwsp, f" {bom}{zwsp}\u00ad ", f"{zwsp}a cat{zwsp}", f"mi{zwnj}khaham", f"a {zwj} b"]
    assert clean(lines) == (["", "", "a cat", f"mi{zwnj}khaham", f"a {zwj} b"], 3)


def test_a_training_pair_whose_side_is_only_a_zero_width_space_is_dropped(tmp_path):
    write(tmp_path / "train.en", "a cat\n\u200b\n")
    write(tmp_path / "train.de", "eine Katze\nein Hund\n")
    text = TextFileCorpus(str(tmp_path), "en", "de").load("train")
    assert text.src == ["a cat"] and text.stats["empty_dropped"] == 1


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


# ------------------------------------------------------------------ unreadable and odd files
def test_unreadable_file_is_a_data_error_naming_it(tmp_path, monkeypatch):
    from pathlib import Path

    from transformer_mt.data import corpus as corpus_module

    write(tmp_path / "train.en", "a\n")
    write(tmp_path / "train.de", "b\n")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    monkeypatch.setattr(corpus_module, "open", denied, raising=False)
    with pytest.raises(DataError) as err:
        read_lines(tmp_path / "train.en")
    assert str(err.value) == f"{tmp_path}/train.en: permission denied"
    with pytest.raises(DataError) as err:
        TextFileCorpus(str(tmp_path), "en", "de").fingerprint("train")
    assert str(err.value) == f"{tmp_path}/train.en: permission denied"


def test_a_directory_is_named_as_one_for_reading_and_for_corpora(tmp_path):
    (tmp_path / "train.en").mkdir()
    write(tmp_path / "train.de", "b\n")
    with pytest.raises(DataError) as err:
        read_lines(tmp_path / "train.en")
    assert str(err.value) == f"{tmp_path}/train.en: is a directory"
    for read in (TextFileCorpus(str(tmp_path), "en", "de").load, TextFileCorpus(str(tmp_path), "en", "de").fingerprint):
        with pytest.raises(DataError) as err:
            read("train")
        assert str(err.value) == f"{tmp_path}/train.en: is a directory"


def test_a_fifo_is_read_but_is_no_corpus(tmp_path):
    """read_lines reads a named pipe (input=, source= of a task); a corpus is read more than once
    (its hash, then its lines), so a pipe there is refused rather than hashed empty."""
    import os
    import threading

    os.mkfifo(tmp_path / "train.en")
    writer = threading.Thread(target=lambda: (tmp_path / "train.en").write_text("a\nb\n"), daemon=True)
    writer.start()
    assert read_lines(tmp_path / "train.en") == ["a", "b"]
    writer.join(timeout=10)
    write(tmp_path / "train.de", "x\ny\n")
    with pytest.raises(DataError) as err:
        TextFileCorpus(str(tmp_path), "en", "de").load("train")
    assert str(err.value) == f"{tmp_path}/train.en: not a regular file (a corpus is read more than once)"


def test_empty_training_file_is_named(tmp_path):
    write(tmp_path / "train.en", b"")
    write(tmp_path / "train.de", "x\n")
    with pytest.raises(DataError) as err:
        TextFileCorpus(str(tmp_path), "en", "de").load("train")
    assert str(err.value) == f"{tmp_path}/train.en: empty file"
    write(tmp_path / "train.jsonl", b"")
    with pytest.raises(DataError) as err:
        TableCorpus(str(tmp_path), "en", "de", {"train": "train.jsonl"}).load("train")
    assert str(err.value) == f"{tmp_path}/train.jsonl: empty file"


def test_training_pairs_that_all_have_an_empty_side_name_both_files(tmp_path):
    write(tmp_path / "train.en", "\n  \na\n")
    write(tmp_path / "train.de", "x\ny\n\t\n")
    with pytest.raises(DataError) as err:
        TextFileCorpus(str(tmp_path), "en", "de").load("train")
    assert str(err.value) == (f"{tmp_path}/train.en / {tmp_path}/train.de: "
                              "no sentence pairs (every pair has an empty side)")
    write(tmp_path / "train.tsv", "en\tde\n\tx\n")
    with pytest.raises(DataError) as err:
        TableCorpus(str(tmp_path), "en", "de", {"train": "train.tsv"}).load("train")
    assert str(err.value) == f"{tmp_path}/train.tsv: no sentence pairs (every pair has an empty side)"


def test_bare_cr_line_endings_are_refused_and_crlf_works(tmp_path):
    write(tmp_path / "mac.txt", "one\rtwo\rthree\r")
    with pytest.raises(DataError) as err:
        read_lines(tmp_path / "mac.txt")
    assert str(err.value) == (f"{tmp_path}/mac.txt:1: CR line ending (old Mac style); "
                              "convert the file to LF or CRLF line endings")
    write(tmp_path / "mixed.txt", "one\r\ntwo\r\nthree\rfour\r\n")
    with pytest.raises(DataError, match=r"mixed\.txt:3: CR line ending"):
        read_lines(tmp_path / "mixed.txt")
    write(tmp_path / "dos.txt", "one\r\n\r\ntwo \r\nthree")
    assert read_lines(tmp_path / "dos.txt") == ["one", "", "two ", "three"]


def test_nul_byte_names_file_and_line(tmp_path):
    write(tmp_path / "bin.txt", b"ok\nfine\nbad\x00byte\n\xff\n")
    with pytest.raises(DataError) as err:
        read_lines(tmp_path / "bin.txt")
    assert str(err.value) == f"{tmp_path}/bin.txt:3: NUL byte (is this a binary file?)"


def test_utf8_bom_is_dropped(tmp_path):
    write(tmp_path / "test.en", "\ufeffa cat\r\nthe dog\r\n")
    write(tmp_path / "test.de", "\ufeffeine Katze\nder Hund\n")
    assert read_lines(tmp_path / "test.en") == ["a cat", "the dog"]
    text = TextFileCorpus(str(tmp_path), "en", "de").load("test")
    assert text.tgt == ["eine Katze", "der Hund"] and text.stats["whitespace_fixed"] == 0
    write(tmp_path / "bad.txt", b"\xef\xbb\xbfok\nbad \xff\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: invalid UTF-8 \(byte 0xff\)"):
        read_lines(tmp_path / "bad.txt")


# ------------------------------------------------------------------ locations of unfiltered pairs
def test_locations_of_text_and_table_pairs(tmp_path):
    write(tmp_path / "val.en", "a\n\nc\n")
    write(tmp_path / "val.de", "x\ny\n\n")
    files = TextFileCorpus(str(tmp_path), "en", "de", splits={"val": "val"})
    assert files.location("val", 0) == f"{tmp_path}/val.en:1"
    assert files.location("val", 2) == f"{tmp_path}/val.en:3"
    write(tmp_path / "val.tsv", "en\tde\na\tx\nb\ty\n")
    tsv = TableCorpus(str(tmp_path), "en", "de", {"val": "val.tsv"})
    assert tsv.load("val").src[1] == "b" and tsv.location("val", 1) == f"{tmp_path}/val.tsv:3"
    write(tmp_path / "test.jsonl", '{"en": "a", "de": "x"}\n{"en": "b", "de": "y"}\n')
    jsonl = TableCorpus(str(tmp_path), "en", "de", {"test": "test.jsonl"})
    assert jsonl.load("test").src[1] == "b" and jsonl.location("test", 1) == f"{tmp_path}/test.jsonl:2"


def test_locations_of_hub_and_toy_pairs():
    from transformer_mt.data.hub import HubCorpus

    hub = HubCorpus("/data/iwslt", src_lang="de", tgt_lang="en", splits={"val": "validation", "test": "test"})
    assert hub.location("val", 0) == "/data/iwslt split validation row 0"
    assert hub.location("test", 41) == "/data/iwslt split test row 41"
    toy = ToyCorpus(num_train=10, num_val=5, num_test=5)
    assert toy.location("val", 0) == "toy corpus val sentence 1"
    assert toy.location("test", 4) == "toy corpus test sentence 5"


# ------------------------------------------------------------------ streaming
def test_lines_are_checked_across_block_boundaries(tmp_path):
    """A file longer than one read block: a character and a CRLF cut by the block boundary are read
    whole, and an error after it names its line as a whole-file read would."""
    from transformer_mt.data.corpus import BLOCK, file_lines

    filler = "x" * 99 + "\n"  # 100 bytes a line
    lines_before = BLOCK // len(filler)
    head = filler * lines_before
    straddle = "a" * (BLOCK - len(head) - 1) + "é\r\n"  # "é" (2 bytes) starts on the block's last byte
    write(tmp_path / "big.txt", (head + straddle + "tail\n").encode() + b"bad \xff\n")
    with pytest.raises(DataError, match=rf"big\.txt:{lines_before + 3}: invalid UTF-8"):
        list(file_lines(tmp_path / "big.txt"))
    write(tmp_path / "big.txt", (head + straddle + "tail").encode())
    lines = list(file_lines(tmp_path / "big.txt"))
    assert len(lines) == lines_before + 2 and lines[-2].endswith("é") and lines[-1] == "tail"
    assert lines == read_lines(tmp_path / "big.txt")


def test_a_sample_of_a_stream_is_seeded_uniform_and_in_order():
    from transformer_mt.data.corpus import in_chunks, sample_pairs

    total, size = 20_000, 2_000
    src = [f"s{i}" for i in range(total)]
    tgt = [f"t{i}" for i in range(total)]
    everything = sample_pairs(in_chunks(src, tgt, size=777), size=total)
    assert everything.src == src and everything.tgt == tgt and everything.stats == {"pairs": total}
    sample = sample_pairs(in_chunks(src, tgt, size=777), size=size)
    index = [int(s[1:]) for s in sample.src]
    assert len(index) == size and index == sorted(set(index))  # distinct pairs, in the corpus's order
    assert sample.tgt == [f"t{i}" for i in index]  # pairs stay pairs
    assert sample.src == sample_pairs(in_chunks(src, tgt, size=5000), size=size).src  # seeded, whatever the chunks
    deciles = [sum(1 for i in index if d * total // 10 <= i < (d + 1) * total // 10) for d in range(10)]
    assert all(abs(count - size // 10) < 0.25 * size // 10 for count in deciles), deciles
