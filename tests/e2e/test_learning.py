"""The default job learns the toy task, and task=evaluate reproduces its test BLEU exactly."""

import json

import pytest

from tests.conftest import compose_config
from transformer_mt.tasks import run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    metrics = run(compose_config(out, []))  # exactly `python run.py`
    return out, metrics


@pytest.mark.slow
def test_tiny_model_learns_the_toy_task(trained):
    out, metrics = trained
    assert metrics["test/bleu"] >= 90.0
    assert metrics["val/bleu_best"] >= 90.0
    assert (out / "checkpoints" / "best.ckpt").is_file() and (out / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.slow
def test_evaluate_reproduces_the_test_bleu_exactly(trained, tmp_path):
    out, metrics = trained
    evaluated = run(compose_config(tmp_path, ["task=evaluate", f"ckpt_path={out}/checkpoints/best.ckpt"]))
    assert evaluated["test/bleu"] == metrics["test/bleu"]
    assert evaluated["test/chrf"] == metrics["test/chrf"]
    assert (tmp_path / "test.translations.txt").read_text() == (out / "test.translations.txt").read_text()
    overrides = ["task=evaluate", f"ckpt_path={out}/checkpoints/best.ckpt", "data.split=val"]
    on_val = run(compose_config(tmp_path, overrides))
    assert on_val["val/bleu"] == pytest.approx(metrics["val/bleu_best"], abs=1e-3)
    assert json.loads((tmp_path / "metrics.json").read_text())["split"] == "val"
