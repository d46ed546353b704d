"""model.positional=rotary and relative from run.py: a training run, task=evaluate of its checkpoint
giving its test BLEU and translations exactly (the cache and the search on positions inside
attention), and its CTranslate2 export (compiled regions: tests/training/test_compile.py)."""

import pytest

from tests.helpers import SMALL_RUN, compose_config
from transformer_mt.tasks import run


@pytest.fixture(scope="module", params=["rotary", "relative"])
def rotary_run(tmp_path_factory, request):
    folder = tmp_path_factory.mktemp(request.param)
    metrics = run(compose_config(folder / "run", [*SMALL_RUN, f"model.positional={request.param}"]))
    return folder / "run", metrics, request.param


def test_a_run_trains_and_its_checkpoint_translates_as_its_test_did(rotary_run, tmp_path):
    out, metrics, _ = rotary_run
    evaluated = run(compose_config(tmp_path, ["task=evaluate", f"ckpt_path={metrics['tested_checkpoint']}"]))
    assert evaluated["test/bleu"] == metrics["test/bleu"]
    assert (tmp_path / "test.translations.txt").read_text() == (out / "test.translations.txt").read_text()


def test_the_run_exports_to_ctranslate2(rotary_run, tmp_path):
    """task=export task.format=ct2 of the run's checkpoint (its outputs against ours:
    tests/interop/test_ct2_positions.py)."""
    pytest.importorskip("ctranslate2")
    _, metrics, _ = rotary_run
    run(compose_config(tmp_path / "run", ["task=export", f"ckpt_path={metrics['tested_checkpoint']}",
                                          "task.format=ct2", f"task.output={tmp_path}/ct2"]))
    assert (tmp_path / "ct2" / "model.bin").is_file()
