"""Config mistakes: one line naming the key, before any data work; checkpoints that cannot be resumed
say why; evaluation uses the data a checkpoint was trained on."""

import json
import logging

import pytest
import torch

from tests.helpers import SMALL_RUN, assert_clean_failure, compose_config, run_py
from transformer_mt.errors import ConfigError, DataError, find_user_error
from transformer_mt.tasks import run
from transformer_mt.tasks.runs.outputs import write_json


@pytest.mark.parametrize("override, message", [
    ("model.d_model=abc", "model.d_model='abc': must be an integer >= 1"),
    ("model.dropout=-0.1", "model.dropout=-0.1: must be a number in [0, 1)"),
    ("model.dropout=1.5", "model.dropout=1.5: must be a number in [0, 1)"),
    ("model.heads=0", "model.heads=0: must be an integer >= 1"),
    ("model.heads=3", "model.d_model=64 is not divisible by model.heads=3"),
    ("+model.colour=red", "+model.colour: model has no key colour and nothing would read it"),
    ("optim.optimizer.lr=-1", "optim.optimizer.lr=-1: must be a number > 0"),
    ("optim.scheduler.warmup_steps=0", "optim.scheduler.warmup_steps=0: must be an integer >= 1"),
    ("trainer.max_epochs=abc", "trainer.max_epochs='abc': must be an integer >= -1"),
    ("data.max_tokens=0", "data.max_tokens=0: must be an integer >= 1"),
    ("data.tokenizer.vocab_size=4", "data.tokenizer.vocab_size=4: must be an integer >= 5"),
    ("module.label_smoothing=1.0", "module.label_smoothing=1.0: must be a number in [0, 1)"),
    ("callbacks.last_checkpoint.every_n_steps=0",
     "callbacks.last_checkpoint.every_n_steps=0: must be an integer >= 1"),
    ("callbacks.dashboard.attention_layer=2", "callbacks.dashboard.attention_layer=2: the model has 2 decoder layers"),
    ("callbacks.dashboard.attention_heads=max", "callbacks.dashboard.attention_heads='max': must be mean or all"),
    ("callbacks.dashboard.num_sentences=-1", "callbacks.dashboard.num_sentences=-1: must be an integer >= 0"),
    ("callbacks.step_meter.peak_flops=0", "callbacks.step_meter.peak_flops=0: must be a number > 0"),
    ("trainer.precision=16-mixed", "trainer.precision=16-mixed: float16 needs a GPU"),
    ("trainer.precision=abc", "trainer.precision='abc': must be 32-true, bf16-mixed, 16-mixed"),
])
def test_a_bad_value_names_its_key_before_any_data_work(tmp_path, override, message):
    with pytest.raises(Exception) as err:  # as run.py sees it: the ConfigError, perhaps wrapped by Hydra
        run(compose_config(tmp_path, [override, "data.corpora.toy.num_train=300"]))
    assert isinstance(find_user_error(err.value), ConfigError)
    assert message in str(find_user_error(err.value))
    assert not (tmp_path / ".cache").exists()  # stopped before the data was touched


def test_training_pairs_longer_than_the_batch_budget_name_both_keys(tmp_path):
    with pytest.raises(ConfigError, match=r"data.max_len=128 keeps training pairs of \d+ tokens, more than the "
                                          r"batch budget data.max_tokens=20: lower data.max_len"):
        run(compose_config(tmp_path, ["data.max_tokens=20", "data.corpora.toy.num_train=300"]))
    assert not (tmp_path / "checkpoints").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
@pytest.mark.parametrize("trainer, instead", [("gpu", "trainer=cpu"), ("ddp", "trainer=ddp_cpu")])
def test_a_gpu_trainer_without_a_gpu_stops_before_any_data_work(tmp_path, trainer, instead):
    with pytest.raises(Exception) as err:  # as run.py sees it: the ConfigError, perhaps wrapped by Hydra
        run(compose_config(tmp_path / "run", [f"trainer={trainer}"], cache_dir=tmp_path / "cache"))
    assert isinstance(find_user_error(err.value), ConfigError), err.value
    line = str(find_user_error(err.value))
    assert "trainer.accelerator=gpu: this machine has no GPU" in line and line.endswith(f"; use {instead}")
    assert not (tmp_path / "cache").exists()
    assert {p.name for p in (tmp_path / "run").iterdir()} <= {"config.yaml", ".hydra", "run.log"}


@pytest.mark.parametrize("overrides, message", [
    (["task=distill"], "task.teacher has no value: give it on the command line (task.teacher=...)"),
    (["task=backtranslate"], "task.monolingual has no value: give it on the command line (task.monolingual=...)"),
    (["data=table"], "data.corpora.table.data_dir, data.corpora.table.src_column, data.corpora.table.tgt_column have "
                     "no value: give them on the command line (data.corpora.table.data_dir=... "
                     "data.corpora.table.src_column=... data.corpora.table.tgt_column=...)"),
])
def test_a_key_left_to_the_user_is_named_before_any_work(tmp_path, overrides, message):
    """A preset's `???` (data=files's data directory, task=distill's teacher) not given on the command
    line: one line naming every such key, before any data work."""
    with pytest.raises(ConfigError) as err:
        run(compose_config(tmp_path, overrides))
    assert str(err.value) == message
    assert not (tmp_path / ".cache").exists()


def test_a_bad_trainer_value_from_the_command_line_is_one_line(tmp_path):
    """A real `python run.py` process, the one here of the one line / exit status 1 / no traceback:
    Hydra parses the command line and run.py turns the ConfigError into that line."""
    result = run_py("trainer.max_epochs=abc", f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={tmp_path}/cache")
    assert_clean_failure(result, "trainer.max_epochs='abc': must be an integer >= -1")
    result = run_py("data=files", f"hydra.run.dir={tmp_path}/files", f"paths.cache_dir={tmp_path}/cache")
    assert_clean_failure(result, "data.corpora.files.data_dir has no value: give it on the command line")


def test_a_trainer_setting_lightning_refuses_is_one_line_naming_it(tmp_path):
    """trainer.limit_val_batches=0.01 of a validation set of one batch checks no batch: Lightning says
    so, and that is the run's one line, as a ConfigError (not a traceback)."""
    with pytest.raises(Exception) as error:
        run(compose_config(tmp_path / "run", [*SMALL_RUN, "trainer.limit_val_batches=0.01"]))
    found = find_user_error(error.value)
    assert isinstance(found, ConfigError) and str(found).startswith(
        "trainer: You requested to check 0.01 of the `val_dataloader` but 0.01 * 1 < 1. Please increase the "
        "`limit_val_batches` argument.")


def test_metrics_json_is_valid_json_with_nan_as_null(tmp_path):
    write_json(tmp_path / "m.json", {"loss": float("nan"), "bleu": [1.0, float("inf")], "ok": 2.5})
    assert json.loads((tmp_path / "m.json").read_text()) == {"loss": None, "bleu": [1.0, None], "ok": 2.5}


# ------------------------------------------------------------------- checkpoints and their data
SMALL = SMALL_RUN


def fails(tmp_path, overrides, error=ConfigError):
    with pytest.raises(Exception) as err:
        run(compose_config(tmp_path, overrides))
    assert isinstance(find_user_error(err.value), error), err.value
    return str(find_user_error(err.value))


def test_resume_refuses_a_weights_only_checkpoint(small_run, tmp_path):
    out, _ = small_run
    epoch = out / "checkpoints" / "epochs" / "epoch000.ckpt"
    message = fails(tmp_path, [*SMALL, f"ckpt_path={epoch}"], DataError)
    assert message == (f"ckpt_path={epoch}: a weights-only checkpoint (no optimizer state, no training position); "
                       "it can be evaluated, translated or averaged, not resumed: resume from checkpoints/last.ckpt")


def test_resume_refuses_another_model_size(small_run, tmp_path):
    out, _ = small_run
    last = out / "checkpoints" / "last.ckpt"
    message = fails(tmp_path, [*SMALL, "model.d_model=32", f"ckpt_path={last}"])
    assert message.startswith(f"model.d_model=32, but ckpt_path={last} was trained with model.d_model=64")


def test_resume_refuses_other_training_data(small_run, tmp_path):
    out, _ = small_run
    last = out / "checkpoints" / "last.ckpt"
    message = fails(tmp_path, [*SMALL, "data.corpora.toy.num_train=200", f"ckpt_path={last}"], DataError)
    assert message.startswith(f"ckpt_path={last} was trained on other data (toy: ToyCorpus(mode=reorder, "
                               "num_train=300")
    assert "resume with the data options of that run" in message


def test_a_file_that_is_not_our_checkpoint_is_one_line(tmp_path):
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.ckpt")
    message = fails(tmp_path / "run", ["task=evaluate", f"ckpt_path={tmp_path}/other.ckpt"], DataError)
    assert f"ckpt_path={tmp_path}/other.ckpt: not a transformer-mt checkpoint" in message


def test_evaluate_without_data_options_uses_the_checkpoints_data(small_run, tmp_path):
    """The run tested on 7 toy sentences; evaluating with no data= scores those 7, not the default 300."""
    out, metrics = small_run
    result = run(compose_config(tmp_path, ["task=evaluate", f"ckpt_path={out}/checkpoints/best.ckpt"]))
    assert result["test/bleu"] == metrics["test/bleu"]
    assert len((tmp_path / "test.translations.txt").read_text().splitlines()) == 7


def test_evaluate_on_other_data_says_so_before_scoring(small_run, tmp_path, caplog):
    out, _ = small_run
    with caplog.at_level(logging.WARNING):
        run(compose_config(tmp_path, ["task=evaluate", f"ckpt_path={out}/checkpoints/best.ckpt", "data=toy",
                                      "data.corpora.toy.num_test=9"]))
    warning = [r.getMessage() for r in caplog.records if "was trained on other data" in r.getMessage()]
    assert warning and "scoring the test split of toy: ToyCorpus(mode=reorder, num_train=10000" in warning[0]
    assert len((tmp_path / "test.translations.txt").read_text().splitlines()) == 9
