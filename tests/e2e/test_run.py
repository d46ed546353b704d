"""End to end through Hydra: compose-based smoke tests and real `python run.py` processes."""

import json
import math

import pytest
import torch

from tests.helpers import FAST, compose_config, run_py
from transformer_mt.errors import ConfigError, find_user_error
from transformer_mt.tasks import run


def test_fast_dev_run_writes_metrics_and_translations(tmp_path):
    metrics = run(compose_config(tmp_path, FAST))
    assert set(metrics) >= {"test/bleu", "test/chrf", "test/ter", "bleu_signature", "ter_signature", "num_parameters",
                            "tokens_per_sec"}
    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert on_disk["test/bleu"] == metrics["test/bleu"]
    assert len((tmp_path / "test.translations.txt").read_text().splitlines()) == 20
    assert (tmp_path / "config.yaml").is_file() and (tmp_path / "tokenizer" / "src.json").is_file()


def test_bf16_mixed_on_cpu_is_close_to_fp32(tmp_path, record_property):
    fp32 = run(compose_config(tmp_path / "fp32", [*FAST, "trainer=cpu"]))
    bf16 = run(compose_config(tmp_path / "bf16", [*FAST, "trainer=cpu", "trainer.precision=bf16-mixed"]))
    record_property("bf16_loss_apart", abs(bf16["test/loss"] - fp32["test/loss"]) / fp32["test/loss"])
    assert math.isfinite(bf16["test/loss"])
    assert bf16["test/loss"] != fp32["test/loss"]  # autocast really ran in bf16
    assert bf16["test/loss"] == pytest.approx(fp32["test/loss"], rel=0.02)


@pytest.mark.parametrize("logger", ["wandb", "tensorboard"])
def test_other_loggers(tmp_path, logger, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    overrides = [*FAST[1:], f"logger={logger}", "trainer.max_epochs=1", "trainer.limit_train_batches=2",
                 "trainer.limit_val_batches=1"]
    run(compose_config(tmp_path, overrides))
    assert (tmp_path / ("wandb" if logger == "wandb" else "tensorboard")).is_dir()


def test_every_model_preset_builds(tmp_path):
    from hydra.utils import instantiate

    from transformer_mt.model import Transformer, TransformerConfig
    from transformer_mt.tasks.runs.init_from import architecture

    for preset in ("tiny", "small", "base", "big"):
        cfg = compose_config(tmp_path, [f"model={preset}"])
        with torch.device("meta"):
            model = Transformer(TransformerConfig(src_vocab_size=1000, tgt_vocab_size=1000, **architecture(cfg.model)))
        assert model.num_parameters() > 0
        instantiate(cfg.trainer, logger=False)  # the trainer preset resolves too


def test_bad_data_path_is_one_clean_line_and_exit_1(tmp_path):
    result = run_py("data=files", f"data.corpora.files.data_dir={tmp_path}/nowhere", f"hydra.run.dir={tmp_path}/run")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {tmp_path}/nowhere: no such folder (a corpus's data_dir; data=multi30k's is under paths.data_dir, "
        "which is $DATA_DIR, else data/ in the project)")


def test_evaluate_without_checkpoint_is_a_clear_error(tmp_path):
    """In this process (test_bad_data_path_is_one_clean_line_and_exit_1 runs run.py itself): the
    ConfigError that run.py prints as its one line `error: ...` with exit status 1."""
    with pytest.raises(Exception) as err:  # as run.py sees it: the ConfigError, perhaps wrapped by Hydra
        run(compose_config(tmp_path / "run", ["task=evaluate"]))
    assert isinstance(find_user_error(err.value), ConfigError), err.value
    assert "ckpt_path=PATH" in str(find_user_error(err.value))


@pytest.mark.slow
def test_hub_preset_on_a_dataset_saved_by_datasets(tmp_path):
    import datasets

    from transformer_mt.data.toy import ToyCorpus

    toy = ToyCorpus(num_train=300, num_val=12, num_test=12)
    splits = {name: toy.load(split) for name, split in (("train", "train"), ("validation", "val"), ("test", "test"))}
    datasets.DatasetDict({
        name: datasets.Dataset.from_dict({"translation": [{"xx": s, "yy": t} for s, t in zip(text.src, text.tgt)]})
        for name, text in splits.items()
    }).save_to_disk(str(tmp_path / "saved"))
    overrides = ["debug=fast", "data=hub", f"data.corpora.hub.path={tmp_path}/saved", "data.corpora.hub.src_lang=xx",
                 "data.corpora.hub.tgt_lang=yy", "data.tokenizer.vocab_size=256"]
    metrics = run(compose_config(tmp_path / "run", overrides))
    assert len((tmp_path / "run" / "test.translations.txt").read_text().splitlines()) == 12
    assert metrics["num_parameters"] > 0


def test_sentencepiece_with_separate_vocabularies(tmp_path):
    overrides = [*FAST, "data.tokenizer.type=sentencepiece", "data.tokenizer.joint=false",
                 "data.tokenizer.vocab_size=120", "model.tie_embeddings=decoder"]
    run(compose_config(tmp_path, overrides))
    assert {p.name for p in (tmp_path / "tokenizer").iterdir()} == {"src.model", "tgt.model"}
    overrides[-1] = "model.tie_embeddings=all"
    with pytest.raises(Exception) as err:  # Hydra wraps it; run.py prints the ConfigError's line
        run(compose_config(tmp_path / "tied", overrides))
    assert isinstance(find_user_error(err.value), ConfigError)
    assert "use model.tie_embeddings=decoder" in str(find_user_error(err.value))

