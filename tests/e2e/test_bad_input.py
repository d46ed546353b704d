"""Bad input: one clear line naming the file / line / key, exit status 1, no traceback, nothing
written half-way."""

import pytest

from tests.helpers import (
    assert_clean_failure,
    assert_nothing_half_written,
    compose_config,
    good_corpus,
    run_py,
    write,
)
from transformer_mt.errors import DataError, find_user_error
from transformer_mt.tasks import run

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile


def fails(tmp_path, *overrides: str, error: type = DataError) -> str:
    """`python run.py OVERRIDES` (run directory tmp_path/run, cache tmp_path/cache) in this process
    (a process costs seconds of imports): it must stop with the user's error that run.py prints as
    its one line `error: ...` (exit status 1, no traceback); that error's message."""
    with pytest.raises(Exception) as err:  # as run.py sees it: the error, perhaps wrapped by Hydra
        run(compose_config(tmp_path / "run", list(overrides), cache_dir=tmp_path / "cache"))
    assert isinstance(find_user_error(err.value), error), err.value
    return str(find_user_error(err.value))


def files_fails(tmp_path, *extra: str) -> str:
    """As files_run (one epoch of data=files on the corpus in tmp_path/corpus), in this process: the
    message of the DataError run.py prints as its one line."""
    return fails(tmp_path, "data=files", f"data.corpora.files.data_dir={tmp_path}/corpus", "trainer.max_epochs=1",
                 *extra)


def test_missing_file(tmp_path):
    (tmp_path / "corpus").mkdir()
    assert f"{tmp_path}/corpus/train.en: no such file" in files_fails(tmp_path)
    assert_nothing_half_written(tmp_path)


def test_different_line_counts(tmp_path):
    good_corpus(tmp_path / "corpus")
    write(tmp_path / "corpus", "train.de", b"eine kleine Katze\n")
    assert "train.en has 2 lines but" in files_fails(tmp_path)
    assert_nothing_half_written(tmp_path)


def test_invalid_utf8(tmp_path):
    good_corpus(tmp_path / "corpus")
    write(tmp_path / "corpus", "train.de", b"eine kleine Katze\nder \xc3\x28Hund\n")
    assert f"{tmp_path}/corpus/train.de:2: invalid UTF-8" in files_fails(tmp_path)
    assert_nothing_half_written(tmp_path)


def test_empty_training_set_after_filtering(tmp_path):
    good_corpus(tmp_path / "corpus")
    assert "no training pairs left after filtering" in files_fails(tmp_path, "data.max_len=2")
    assert_nothing_half_written(tmp_path)


def test_an_over_long_test_sentence_is_named_before_training(tmp_path):
    good_corpus(tmp_path / "corpus")
    write(tmp_path / "corpus", "test.en", b"a small cat\n" + b"word " * 600 + b"\n")
    write(tmp_path / "corpus", "test.de", b"eine kleine Katze\nWort\n")
    message = files_fails(tmp_path, "data.eval_max_tokens=256")
    assert f"{tmp_path}/corpus/test.en:2: " in message
    assert "tokens, more than the batch budget data.eval_max_tokens=256 (test sentences are never filtered)" \
        in message
    assert_nothing_half_written(tmp_path)


def test_hub_name_offline(tmp_path, monkeypatch):
    """A real `python run.py` process, the representative one here of the one line / exit status 1 /
    no traceback: HF_HUB_OFFLINE is in the environment the process starts with (huggingface_hub
    reads it when imported)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = run_py("data=wmt14", f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={tmp_path}/cache")
    assert_clean_failure(result, "data.corpora.wmt14.path=wmt14: the Hugging Face hub cannot be reached")
    assert "data=files" in result.stderr
    assert_nothing_half_written(tmp_path)


def test_tokenizer_file_that_does_not_match_the_checkpoint(tmp_path, small_checkpoint):
    from transformer_mt.data.tokenizer import TokenizerOptions
    from transformer_mt.data.toy import ToyCorpus
    from transformer_mt.data.vocabulary_training import build_vocabularies

    train = ToyCorpus(num_train=300).load("train")
    build_vocabularies(train.src, train.tgt, TokenizerOptions(vocab_size=120)).src.save(tmp_path / "other.json")
    message = fails(tmp_path, "task=evaluate", f"ckpt_path={small_checkpoint}", "data=toy",
                    f"data.tokenizer.file={tmp_path}/other.json")
    assert f"data.tokenizer.file={tmp_path}/other.json: its vocabulary (" in message
    assert "is not the checkpoint's" in message
    assert not (tmp_path / "run" / "metrics.json").exists()
