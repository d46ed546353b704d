"""The build step: a run settles what it starts from, then builds its datamodule, module and trainer
once each; nothing is set on them afterwards and the config is never changed."""

import copy

import pytest
import torch

from tests.helpers import FAST, SMALL_RUN, compose_config
from transformer_mt.data.datamodule import TranslationDataModule
from transformer_mt.errors import ConfigError
from transformer_mt.tasks.runs.build import build_datamodule, build_module, build_trainer
from transformer_mt.tasks.runs.start import UpdatePlan, processes, settle, update_plan
from transformer_mt.training import TranslationModule


def test_built_parts_are_whole_and_a_run_changes_nothing_they_were_built_with(tmp_path):
    cfg = compose_config(tmp_path, FAST)
    given = copy.deepcopy(cfg)
    trainer = build_trainer(cfg)
    start = settle(cfg)
    datamodule = build_datamodule(start)
    module = build_module(start, datamodule)
    # whole when built: the vocabularies are there before any loader, the module is built from them
    vocab = datamodule.vocabularies()
    assert module.model.config.src_vocab_size == vocab.src.vocab_size and module.tokenizer.same_as(vocab)
    hparams, model, tokenizer = copy.deepcopy(dict(module.hparams)), module.model, module.tokenizer
    trainer.fit(module, datamodule=datamodule)
    trainer.test(module, datamodule=datamodule, verbose=False)
    assert datamodule.vocabularies() is vocab and module.tokenizer is tokenizer and module.model is model
    assert dict(module.hparams) == hparams
    assert cfg == given  # the config is never changed
    assert "test" in module.results and "val" in module.results


@pytest.mark.parametrize("cls", [TranslationDataModule, TranslationModule])
def test_parts_have_no_setters(cls):
    """What a part needs arrives through its constructor: none of ours offers a set_ method."""
    assert not [name for name in vars(cls) if name.startswith("set_")]


def test_a_resume_settles_the_checkpoints_vocabularies_before_any_part_is_built(small_checkpoint, tmp_path):
    cfg = compose_config(tmp_path, [*SMALL_RUN, f"ckpt_path={small_checkpoint}"])
    start = settle(cfg)
    saved = torch.load(small_checkpoint, weights_only=True, map_location="cpu")
    assert start.resume == small_checkpoint and start.weights is None
    assert start.vocabularies.to_dict() == saved["hyper_parameters"]["tokenizer"]
    assert start.resumed_data == saved["hyper_parameters"]["data"]
    assert build_datamodule(start).vocabularies() is start.vocabularies  # given: not trained again


def test_a_resume_with_another_batch_size_says_so(tmp_path, caplog):
    """data.max_tokens cuts the batches: a resume with another value goes on in another batch order,
    and a warning names the key, the old and the new value."""
    from transformer_mt.tasks import run

    small = ["data.corpora.toy.num_train=300", "data.corpora.toy.num_val=10", "data.corpora.toy.num_test=7",
             "trainer.limit_val_batches=0", "~callbacks.epoch_checkpoint"]
    cache = tmp_path / "cache"
    run(compose_config(tmp_path / "first", [*small, "trainer.max_steps=2"], cache_dir=cache))
    last = tmp_path / "first" / "checkpoints" / "last.ckpt"
    caplog.clear()
    run(compose_config(tmp_path / "same", [*small, "trainer.max_steps=3", f"ckpt_path={last}"], cache_dir=cache))
    assert "data.max_tokens" not in caplog.text
    run(compose_config(tmp_path / "other", [*small, "trainer.max_steps=3", f"ckpt_path={last}", "data.max_tokens=512"],
                       cache_dir=cache))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "max_tokens" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith(f"data.max_tokens 1024 -> 512: ckpt_path={last} was "
                                                         "trained with data.max_tokens=1024"), warnings


def test_the_update_plan_counts_the_processes_lightning_counts(tmp_path):
    """The plan divides tokens_per_update among the processes as Lightning's accelerators parse
    trainer.devices (an int, a string, "auto"; a GPU list "0,1" is two), without building a Trainer;
    a count the accelerator refuses is one line naming the key."""
    cfg = compose_config(tmp_path, ["tokens_per_update=1000", "data.max_tokens=256"])
    assert update_plan(cfg, 2, 1) == UpdatePlan(processes=2, accumulation=2, batch_tokens=250)  # 2 x 250 x 2 a step
    assert update_plan(cfg, 2, 3) == UpdatePlan(6, 1, 167)
    ddp = compose_config(tmp_path, ["trainer=ddp_cpu", "tokens_per_update=1000", "data.max_tokens=256"])
    assert processes(ddp.trainer) == (2, 1) and update_plan(ddp, *processes(ddp.trainer)) == UpdatePlan(2, 2, 250)
    assert processes(compose_config(tmp_path, ["trainer=ddp_cpu", "trainer.devices='3'"]).trainer) == (3, 1)
    assert processes(compose_config(tmp_path, ["trainer.num_nodes=2"]).trainer) == (1, 2)
    assert update_plan(compose_config(tmp_path, ["trainer=ddp_cpu"]), 2, 1) is None  # no tokens_per_update: no plan
    with pytest.raises(ConfigError, match=r"^trainer.devices=0: "):
        processes(compose_config(tmp_path, ["trainer=cpu", "trainer.devices=0"]).trainer)
