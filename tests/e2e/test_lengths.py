"""Sentences longer than the model takes (model.max_positions) stop a run before training, naming
the keys or the file and line, instead of when their batch comes."""

import pytest

from tests.helpers import assert_nothing_half_written, compose_config, good_corpus, write
from transformer_mt.errors import ConfigError, DataError, find_user_error
from transformer_mt.tasks import run


def test_a_max_len_above_the_model_positions_is_refused_before_any_data_work(tmp_path):
    """data.max_len is the longest sequence training shows the model (source with EOS, target with
    BOS or EOS), so data.max_len=256 fits model.max_positions=256 and 257 does not."""
    with pytest.raises(ConfigError, match=r"^data.max_len=257 keeps training pairs of up to 257 tokens a side, more "
                                          r"than model.max_positions=256: lower data.max_len to 256 or raise "
                                          r"model.max_positions$"):
        run(compose_config(tmp_path, ["data.max_len=257", "data.corpora.toy.num_train=300"]))
    assert not (tmp_path / ".cache").exists()  # stopped before the data was touched
    assert not (tmp_path / "checkpoints").exists()


def test_a_validation_line_longer_than_the_model_takes_is_named_before_training(tmp_path):
    """Validation and test sentences are never filtered: one longer than model.max_positions stops the
    run with its file and line before training (it used to stop training at the first validation)."""
    corpus = tmp_path / "corpus"
    good_corpus(corpus)
    write(corpus, "val.en", b"a small cat\n" + b" ".join([b"the dog"] * 150) + b"\n")
    overrides = ["data=files", f"data.corpora.files.data_dir={corpus}", "trainer.max_epochs=1",
                 "model.max_positions=256"]
    with pytest.raises(Exception) as err:  # as run.py sees it: the DataError that it prints as one line
        run(compose_config(tmp_path / "run", overrides, cache_dir=tmp_path / "cache"))
    assert isinstance(find_user_error(err.value), DataError), err.value
    message = str(find_user_error(err.value))
    assert f"{corpus}/val.en:2: " in message
    assert "more than the model takes, model.max_positions=256 (val sentences are never filtered)" in message
    assert_nothing_half_written(tmp_path)
