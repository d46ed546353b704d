"""The default job learns the toy task, and task=evaluate reproduces its test BLEU exactly."""

import csv
import json

import pytest
import sacrebleu

from tests.helpers import compose_config
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow


def test_tiny_model_learns_the_toy_task(toy_run, record_property):
    out, metrics = toy_run
    record_property("test_bleu", metrics["test/bleu"])
    record_property("val_bleu_best", metrics["val/bleu_best"])
    assert metrics["test/bleu"] >= 90.0
    assert metrics["val/bleu_best"] >= 90.0
    assert (out / "checkpoints" / "best.ckpt").is_file() and (out / "checkpoints" / "last.ckpt").is_file()
    assert len(list((out / "checkpoints" / "epochs").glob("epoch*.ckpt"))) == 10


def test_the_default_jobs_learning_rate_peaks_within_the_run(toy_run):
    """data=toy's schedule (conf/schedule/toy.yaml) fits the default job: the learning rate rises to
    its peak at the warm-up's end, inside the run, then decays (with the paper's 4,000-step warm-up
    the toy job's 3,020 steps all sat inside the warm-up)."""
    out, metrics = toy_run
    rows = [row for row in csv.DictReader((out / "csv" / "metrics.csv").open()) if row.get("train/lr")]
    steps, lrs = [int(row["step"]) for row in rows], [float(row["train/lr"]) for row in rows]
    peak = lrs.index(max(lrs))
    assert metrics["steps"] == 1510 and 0 < peak < len(lrs) - 1
    assert abs(steps[peak] - 800) <= 20  # logged every 20 steps
    assert lrs[-1] < 0.75 * max(lrs) and lrs[0] < 0.1 * max(lrs)


def test_evaluate_reproduces_the_test_bleu_exactly(toy_run, tmp_path):
    out, metrics = toy_run
    evaluated = run(compose_config(tmp_path, ["task=evaluate", f"ckpt_path={out}/checkpoints/best.ckpt"]))
    assert evaluated["test/bleu"] == metrics["test/bleu"]
    assert evaluated["test/chrf"] == metrics["test/chrf"] and evaluated["test/ter"] == metrics["test/ter"]
    assert (tmp_path / "test.translations.txt").read_text() == (out / "test.translations.txt").read_text()
    overrides = ["task=evaluate", f"ckpt_path={out}/checkpoints/best.ckpt", "data.split=val"]
    on_val = run(compose_config(tmp_path, overrides))
    assert on_val["val/bleu"] == pytest.approx(metrics["val/bleu_best"], abs=1e-3)
    assert json.loads((tmp_path / "metrics.json").read_text())["split"] == "val"


def test_evaluate_with_beam_search_and_tokenized_bleu(toy_run, tmp_path, record_property):
    out, metrics = toy_run
    overrides = ["task=evaluate", f"ckpt_path={out}/checkpoints/best.ckpt", "decoding=beam", "task.tokenized_bleu=true"]
    evaluated = run(compose_config(tmp_path, overrides))
    record_property("test_bleu", evaluated["test/bleu"])
    assert evaluated["test/bleu"] >= 90.0
    assert evaluated["decoding"]["_target_"].endswith("BeamSearch")
    hyps = (tmp_path / "test.translations.txt").read_text().splitlines()
    refs = reference_lines()
    assert len(hyps) == len(refs) == 300
    assert "case:lc" in evaluated["bleu_tok_lc_signature"] and "tokenized" in evaluated["bleu_tok_lc_signature"]
    assert evaluated["test/bleu_tok_lc"] >= evaluated["test/bleu"] - 1e-6  # lowercasing can only add matches
    assert evaluated["test/bleu_tok_lc"] == pytest.approx(
        sacrebleu.corpus_bleu(hyps, [refs], lowercase=True, smooth_method="none").score, abs=1e-4
    )


def reference_lines() -> list[str]:
    from transformer_mt.data.toy import ToyCorpus

    return ToyCorpus().load("test").tgt
