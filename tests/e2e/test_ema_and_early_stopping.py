"""callbacks=ema and callbacks=early_stopping over real toy runs: the averaged weights are what
validation scores, what every checkpoint holds, what is averaged and tested, and a resume
continues them exactly; early stopping ends a run as a budget does."""

import pytest
import torch

from tests.helpers import compose_config, interrupt_at, run_py
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow

SMALL = ["data.corpora.toy.num_train=300", "data.corpora.toy.num_val=10", "data.corpora.toy.num_test=7",
         "data.max_tokens=512"]
EMA = [*SMALL, "callbacks=ema", "callbacks.ema.decay=0.9", "trainer.max_epochs=2", "task.last_n=2",
       "callbacks.last_checkpoint.every_n_steps=4"]


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def test_ema_is_validated_checkpointed_averaged_and_tested_and_resumes_exactly(tmp_path):
    cache = tmp_path / "cache"
    metrics = run(compose_config(tmp_path / "ref", EMA, cache_dir=cache))
    checkpoints = tmp_path / "ref" / "checkpoints"
    last = load(checkpoints / "last.ckpt")
    averaged, raw = last["state_dict"], last["current_model_state"]
    assert int(last["averaging_state"]["n_averaged"]) == metrics["steps"] > 10  # one update per step
    assert any(not torch.equal(averaged[k], raw[k]) for k in averaged)  # the average is not the weights
    epoch = load(checkpoints / "epochs" / "epoch001.ckpt")  # written after the last validation, full
    assert all(torch.equal(epoch["state_dict"][k], averaged[k]) for k in averaged)
    assert metrics["tested_checkpoint"] == str(checkpoints / "average.ckpt")
    # the last validation scored the averaged weights: evaluating them on val gives its loss
    evaluate = ["task=evaluate", f"ckpt_path={checkpoints / 'epochs' / 'epoch001.ckpt'}", "data.split=val"]
    on_val = run(compose_config(tmp_path / "eval", evaluate, cache_dir=cache))
    assert on_val["val/loss"] == pytest.approx(metrics["val/loss"], abs=1e-6)

    stopped = run_py(*EMA, *interrupt_at(9, "SIGTERM"), f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={cache}")
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    resumed_from = tmp_path / "run" / "checkpoints" / "last.ckpt"
    run(compose_config(tmp_path / "run", [*EMA, f"ckpt_path={resumed_from}"], cache_dir=cache))
    again = load(tmp_path / "run" / "checkpoints" / "last.ckpt")
    for key in ("state_dict", "current_model_state", "averaging_state"):
        different = [k for k in last[key] if not torch.equal(last[key][k], again[key][k])]
        assert not different, (key, different[:3])


def test_early_stopping_ends_the_run_as_a_budget_does(tmp_path):
    """No validation can beat the first by min_delta=1000 BLEU: with patience 1 training stops after
    the second validation, then the last two epoch checkpoints are averaged and tested (here with
    the EMA as well: callbacks=[ema,early_stopping])."""
    metrics = run(compose_config(tmp_path, [
        *SMALL, "callbacks=[ema,early_stopping]", "callbacks.early_stopping.patience=1",
        "callbacks.early_stopping.min_delta=1000", "trainer.max_epochs=10", "task.last_n=2"]))
    assert metrics["epochs"] == 2 and 0 <= metrics["test/bleu"] <= 100
    assert sorted(p.name for p in (tmp_path / "checkpoints" / "epochs").iterdir()) == ["epoch000.ckpt", "epoch001.ckpt"]
    assert metrics["tested_checkpoint"] == str(tmp_path / "checkpoints" / "average.ckpt")
