"""model.positional=rotary from run.py: a training run, task=evaluate of its checkpoint giving its
test BLEU and translations exactly (the cache and the search on rotated positions), and
CTranslate2's refusal in one line (compiled regions: tests/training/test_compile.py)."""

import pytest

from tests.helpers import SMALL_RUN, compose_config
from transformer_mt.errors import ConfigError
from transformer_mt.tasks import run


@pytest.fixture(scope="module")
def rotary_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rotary")
    metrics = run(compose_config(folder / "run", [*SMALL_RUN, "model.positional=rotary"]))
    return folder / "run", metrics


def test_a_rotary_run_trains_and_its_checkpoint_translates_as_its_test_did(rotary_run, tmp_path):
    out, metrics = rotary_run
    evaluated = run(compose_config(tmp_path, ["task=evaluate", f"ckpt_path={metrics['tested_checkpoint']}"]))
    assert evaluated["test/bleu"] == metrics["test/bleu"]
    assert (tmp_path / "test.translations.txt").read_text() == (out / "test.translations.txt").read_text()


def test_ctranslate2_refuses_a_rotary_model_in_one_line(rotary_run, tmp_path):
    pytest.importorskip("ctranslate2")
    _, metrics = rotary_run
    with pytest.raises(ConfigError, match=r"^model\.positional=rotary: CTranslate2's encoder-decoder spec"):
        run(compose_config(tmp_path / "run", ["task=export", f"ckpt_path={metrics['tested_checkpoint']}",
                                              "task.format=ct2", f"task.output={tmp_path}/ct2"]))
