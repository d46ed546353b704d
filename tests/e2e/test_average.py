"""task=average: the mean of the tensors, clear errors for mismatches, loadable results."""

import re

import pytest
import torch

from tests.helpers import compose_config
from transformer_mt.checkpoints.averaging import average_checkpoints
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.schema.between_groups import averaging
from transformer_mt.tasks import run


def fake_checkpoint(path, d_model=4, tokenizer="tok", seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    state = {"w": torch.randn(3, d_model, dtype=dtype), "b": torch.randn(d_model, dtype=dtype),
             "count": torch.tensor([7])}
    torch.save({"state_dict": state, "hyper_parameters": {"model": {"d_model": d_model}}, "tokenizer": tokenizer,
                "pytorch-lightning_version": "2.6.0"}, path)
    return state


def test_average_of_two_checkpoints_is_the_mean_of_their_tensors(tmp_path):
    a = fake_checkpoint(tmp_path / "a.ckpt", seed=0)
    b = fake_checkpoint(tmp_path / "b.ckpt", seed=1)
    avg = average_checkpoints([tmp_path / "a.ckpt", tmp_path / "b.ckpt"])
    for name in ("w", "b"):
        assert torch.equal(avg["state_dict"][name], ((a[name].double() + b[name].double()) / 2).float())
    assert torch.equal(avg["state_dict"]["count"], torch.tensor([7]))
    assert avg["averaged_from"] == [str(tmp_path / "a.ckpt"), str(tmp_path / "b.ckpt")]
    # written in today's layout (checkpoints/upgrades.py): the tokenizer as a hyper-parameter
    assert "tokenizer" not in avg and avg["hyper_parameters"]["tokenizer"] == {
        "src": {"kind": "tokenizers", "data": "tok"}, "tgt": None}


def test_tied_weights_stay_one_tensor_so_the_average_is_saved_once(tmp_path):
    """Tied embeddings (one tensor under three names) are averaged once and written once: an average
    of the Multi30k recipe is 10.3 MB, not 20 MB."""
    for seed in (0, 1):
        torch.manual_seed(seed)
        embed = torch.randn(1000, 64)
        state = {"src_embed.weight": embed, "tgt_embed.weight": embed, "output_proj.weight": embed,
                 "layer.weight": torch.randn(64, 64)}
        checkpoint = {"state_dict": state, "hyper_parameters": {"model": {}}, "tokenizer": "tok"}
        torch.save(checkpoint, tmp_path / f"{seed}.ckpt")
    avg = average_checkpoints([tmp_path / "0.ckpt", tmp_path / "1.ckpt"])["state_dict"]
    assert avg["src_embed.weight"] is avg["tgt_embed.weight"] is avg["output_proj.weight"]
    assert avg["layer.weight"] is not avg["src_embed.weight"]
    torch.save(avg, tmp_path / "avg.pt")
    one_copy = (1000 * 64 + 64 * 64) * 4
    assert one_copy < (tmp_path / "avg.pt").stat().st_size < one_copy + 10_000


@pytest.mark.parametrize("other, message", [
    (dict(d_model=5), r"b\.ckpt: w has shape \(3, 5\), .*a\.ckpt has \(3, 4\)"),
    (dict(tokenizer="other"), r"b\.ckpt: its tokenizer differs"),
])
def test_mismatched_checkpoints_are_a_clear_error(tmp_path, other, message):
    fake_checkpoint(tmp_path / "a.ckpt")
    fake_checkpoint(tmp_path / "b.ckpt", **other)
    with pytest.raises(DataError, match=message):
        average_checkpoints([tmp_path / "a.ckpt", tmp_path / "b.ckpt"])


def test_selection_needs_checkpoints_or_a_run_dir(tmp_path):
    with pytest.raises(ConfigError, match=r"needs ckpt_path=\[a.ckpt,b.ckpt,...\], or task.run_dir=DIR"):
        run(compose_config(tmp_path, ["task=average"]))
    with pytest.raises(DataError, match="no epoch checkpoints"):
        run(compose_config(tmp_path, ["task=average", f"task.run_dir={tmp_path}", "task.last_n=2"]))


@pytest.mark.slow
@pytest.mark.parametrize("selection", ["task.last_n=3", "task.best_n=3"])
def test_average_of_a_run_loads_in_evaluate(toy_run, tmp_path, selection, record_property):
    out, metrics = toy_run
    result = run(compose_config(tmp_path / "avg", ["task=average", f"task.run_dir={out}", selection]))
    epochs = sorted((out / "checkpoints" / "epochs").glob("epoch*.ckpt"))
    if selection == "task.last_n=3":
        assert result["checkpoints"] == [str(p) for p in epochs[-3:]]
    else:
        scores = {str(p): torch.load(p, weights_only=True)["val_bleu"] for p in epochs}
        assert sorted(scores.values(), reverse=True)[:3] == [scores[p] for p in result["checkpoints"]]
    evaluated = run(compose_config(tmp_path / "eval", ["task=evaluate", f"ckpt_path={result['output']}"]))
    record_property("test_bleu", evaluated["test/bleu"])
    assert evaluated["test/bleu"] >= 90.0


@pytest.mark.slow
def test_training_averages_its_last_epochs_and_tests_the_average(tmp_path):
    """task.last_n=3: after 4 epochs checkpoints/average.ckpt is the mean of epochs 2-4,
    the run's test metrics are that checkpoint's (task=evaluate reproduces them exactly), with
    tokenized lowercased BLEU beside them; best.ckpt is kept."""
    from tests.helpers import SMALL_RUN

    out = tmp_path / "train"
    overrides = [*SMALL_RUN, "trainer.max_epochs=4", "task.last_n=3", "task.tokenized_bleu=true"]
    metrics = run(compose_config(out, overrides))
    epochs = sorted((out / "checkpoints" / "epochs").glob("epoch*.ckpt"))
    average = out / "checkpoints" / "average.ckpt"
    assert len(epochs) == 4 and metrics["tested_checkpoint"] == str(average)
    assert (out / "checkpoints" / "best.ckpt").is_file() and metrics["best_checkpoint"].endswith("best.ckpt")
    saved = torch.load(average, weights_only=True)
    assert saved["averaged_from"] == [str(p) for p in epochs[1:]]
    states = [torch.load(p, weights_only=True)["state_dict"] for p in epochs[1:]]
    for name, value in saved["state_dict"].items():
        expected = (sum(s[name].double() for s in states) / 3).to(value.dtype) if value.is_floating_point() else value
        assert torch.equal(value, expected), name
    assert not torch.equal(states[0]["model.output_proj.weight"], states[2]["model.output_proj.weight"])
    assert "test/bleu_tok_lc" in metrics and "case:lc" in metrics["bleu_tok_lc_signature"]
    evaluated = run(compose_config(tmp_path / "eval", ["task=evaluate", f"ckpt_path={average}"]))
    assert evaluated["test/bleu"] == metrics["test/bleu"] and evaluated["test/chrf"] == metrics["test/chrf"]


def test_averaging_needs_the_epoch_checkpoints(tmp_path):
    for extra, message in ((["callbacks.epoch_checkpoint=null"], "must be on"),
                           (["callbacks.epoch_checkpoint.save_top_k=2"], "keep at least that many"),
                           ([], None)):
        cfg = compose_config(tmp_path, ["task.last_n=3", *extra])
        if message is None:
            assert averaging(cfg) is None
            continue
        assert re.match(f"task.last_n=3 .*{message}", averaging(cfg))
    with pytest.raises(ConfigError, match="task.last_n=-1: must be an integer >= 0"):  # the schema's rule
        run(compose_config(tmp_path, ["task.last_n=-1"]))
