"""Sentences longer than the model takes (model.max_positions) stop a run before training, naming
the keys or the file and line, instead of when their batch comes."""

import pytest

from tests.helpers import (
    assert_clean_failure,
    assert_nothing_half_written,
    compose_config,
    files_run,
    good_corpus,
    write,
)
from transformer_mt.errors import ConfigError
from transformer_mt.tasks import run


def test_a_max_len_above_the_model_positions_is_refused_before_any_data_work(tmp_path):
    """data.max_len is the longest sequence training shows the model (source with EOS, target with
    BOS or EOS), so data.max_len=256 fits model.max_positions=256 and 257 does not."""
    with pytest.raises(ConfigError, match=r"^data.max_len=257 keeps training pairs of up to 257 tokens a side, more "
                                          r"than model.max_positions=256: lower data.max_len to 256 or raise "
                                          r"model.max_positions$"):
        run(compose_config(tmp_path, ["data.max_len=257", "data.corpus.num_train=300"]))
    assert not (tmp_path / ".cache").exists()  # stopped before the data was touched
    assert not (tmp_path / "checkpoints").exists()


def test_a_validation_line_longer_than_the_model_takes_is_named_before_training(tmp_path):
    """Validation and test sentences are never filtered: one longer than model.max_positions stops the
    run with its file and line before training (it used to stop training at the first validation)."""
    corpus = tmp_path / "corpus"
    good_corpus(corpus)
    write(corpus, "val.en", b"a small cat\n" + b" ".join([b"the dog"] * 150) + b"\n")
    result = files_run(tmp_path, "model.max_positions=256")
    assert_clean_failure(result, f"{corpus}/val.en:2: ")
    assert "more than the model takes, model.max_positions=256 (val sentences are never filtered)" in result.stderr
    assert_nothing_half_written(tmp_path)
