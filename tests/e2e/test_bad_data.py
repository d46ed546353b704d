"""Bad training data through `python run.py`: empty files, empty sides, CR line endings, NUL bytes,
a UTF-8 BOM, and a vocabulary size the trainer cannot honour. Errors come before any vocabulary is
trained (no vocab-* entry in the cache)."""

import pytest

from tests.helpers import (
    assert_clean_failure,
    assert_nothing_half_written,
    compose_config,
    files_run,
    good_corpus,
    write,
)
from transformer_mt.errors import DataError, find_user_error
from transformer_mt.tasks import run

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile


def files_fails(tmp_path, *extra: str) -> str:
    """As files_run (one epoch of data=files on the corpus in tmp_path/corpus, cache tmp_path/cache),
    in this process (a process costs seconds of imports): it must stop with the DataError that run.py
    prints as its one line `error: ...` (exit status 1, no traceback); that error's message."""
    overrides = ["data=files", f"data.corpora.files.data_dir={tmp_path}/corpus", "trainer.max_epochs=1", *extra]
    with pytest.raises(Exception) as err:  # as run.py sees it: the error, perhaps wrapped
        run(compose_config(tmp_path / "run", overrides, cache_dir=tmp_path / "cache"))
    assert isinstance(find_user_error(err.value), DataError), err.value
    return str(find_user_error(err.value))


def assert_no_vocabulary(tmp_path) -> None:
    cache = tmp_path / "cache"
    assert not cache.exists() or not [p.name for p in cache.iterdir() if p.name.startswith("vocab-")]


@pytest.mark.parametrize("name, content, expected", [
    ("train.de", b"", "{corpus}/train.de: empty file"),
    ("train.en", b"\n  \n", "{corpus}/train.en / {corpus}/train.de: no sentence pairs (every pair has an empty side)"),
    ("train.en", b"a small cat\rthe dog\r",
     "{corpus}/train.en:1: CR line ending (old Mac style); convert the file to LF or CRLF line endings"),
    ("train.de", b"eine kleine Katze\nder\x00Hund\n", "{corpus}/train.de:2: NUL byte (is this a binary file?)"),
])
def test_bad_training_file_is_one_line_before_any_vocabulary(tmp_path, name, content, expected):
    corpus = tmp_path / "corpus"
    good_corpus(corpus)
    write(corpus, name, content)
    assert files_fails(tmp_path) == expected.format(corpus=corpus)
    assert_no_vocabulary(tmp_path)
    assert_nothing_half_written(tmp_path)


def test_sentencepiece_vocab_size_below_its_alphabet(tmp_path):
    """A real `python run.py` process, the representative one here of the one line / exit status 1 /
    no traceback (the others run in this process): sentencepiece's C++ trainer runs in it, and what
    it refuses must still end the process as that one line."""
    good_corpus(tmp_path / "corpus")
    result = files_run(tmp_path, "data.tokenizer.type=sentencepiece", "data.tokenizer.vocab_size=5")
    assert_clean_failure(result, "error: data.tokenizer.vocab_size=5 is rejected by sentencepiece")
    assert_no_vocabulary(tmp_path)
    assert_nothing_half_written(tmp_path)


def test_bom_and_crlf_train_and_a_larger_vocabulary_is_warned(tmp_path):
    """BOMs are dropped (no token, no reference starts with one), CRLF works, vocab_size=5 warns."""
    good_corpus(tmp_path / "corpus")
    for split in ("train", "test"):
        write(tmp_path / "corpus", f"{split}.en", "\ufeffa small cat\r\nthe dog\r\n".encode())
        write(tmp_path / "corpus", f"{split}.de", "\ufeffeine kleine Katze\r\nder Hund\r\n".encode())
    result = files_run(tmp_path, "data.tokenizer.vocab_size=5", "debug=fast")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "data.tokenizer.vocab_size=5, but the vocabulary has " in result.stderr
    vocabulary = (tmp_path / "run" / "tokenizer" / "src.json").read_text(encoding="utf-8")
    assert "\ufeff" not in vocabulary and "\\ufeff" not in vocabulary.lower() and "\r" not in vocabulary
    assert '"▁eine"' in vocabulary or '"e"' in vocabulary  # the words themselves are there
