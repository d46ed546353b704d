"""A resume says what of a changed config it cannot honour (issue 48): another optimizer or
schedule is refused in one line; a budget, data.tokenizer.* and a callback added since are said."""

import logging

import pytest
from lightning.pytorch.callbacks import EarlyStopping

from tests.helpers import SMALL_RUN, compose_config
from transformer_mt.checkpoints.loading import read_checkpoint
from transformer_mt.errors import ConfigError
from transformer_mt.tasks import run
from transformer_mt.tasks.runs.resume import check_resume, say_fresh_callbacks


@pytest.mark.parametrize(("override", "message"), [
    ("optim.optimizer.lr=0.25", "optim.optimizer.lr=0.25, but ckpt_path={} was trained with optim.optimizer.lr=1.0"),
    ("optim.scheduler.warmup_steps=100", "optim.scheduler.warmup_steps=100, but ckpt_path={} was trained with "
                                         "optim.scheduler.warmup_steps=800"),
    ("optim=inverse_sqrt", "optim.optimizer.lr=0.0005, but ckpt_path={} was trained with optim.optimizer.lr=1.0")])
def test_another_optimizer_or_schedule_is_refused_in_one_line(small_checkpoint, tmp_path, override, message):
    with pytest.raises(ConfigError) as err:
        run(compose_config(tmp_path / "run", [*SMALL_RUN, "trainer.max_epochs=2", f"ckpt_path={small_checkpoint}",
                                              override]))
    assert str(err.value).startswith(message.format(small_checkpoint))
    if override == "optim=inverse_sqrt":  # another schedule: every key of it named, not only the lr
        assert "; also optim.scheduler._target_=transformer_mt.training.schedule.inverse_sqrt (trained with " \
               "transformer_mt.training.schedule.noam)" in str(err.value)
    assert f"fine-tune its weights in a new run (model.init_from={small_checkpoint})" in str(err.value)
    assert not (tmp_path / "run" / "checkpoints").exists()  # refused before any work


def test_an_implementation_choice_of_the_optimizer_may_change(small_checkpoint, tmp_path):
    cfg = compose_config(tmp_path, [*SMALL_RUN, f"ckpt_path={small_checkpoint}", "optim.optimizer.fused=false"])
    check_resume(cfg, read_checkpoint(small_checkpoint), small_checkpoint)


def test_the_budget_the_tokenizer_and_a_new_callback_are_said(small_checkpoint, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    checkpoint = read_checkpoint(small_checkpoint)
    step = checkpoint["global_step"]
    cfg = compose_config(tmp_path, [*SMALL_RUN, "trainer.max_epochs=3", f"ckpt_path={small_checkpoint}",
                                    "data.tokenizer.vocab_size=300"])
    stopper = EarlyStopping(monitor="val/bleu", mode="max")
    check_resume(cfg, checkpoint, small_checkpoint)
    say_fresh_callbacks([stopper], checkpoint, small_checkpoint)
    text = caplog.text
    assert f"resuming ckpt_path={small_checkpoint} at step {step} after 1 epochs; training on to trainer.max_epochs=3" \
        in text
    assert "data.tokenizer.vocab_size=300: ignored on a resume, which keeps the vocabularies of ckpt_path=" in text
    assert "EarlyStopping: ckpt_path=" in text and "it starts fresh" in text
    caplog.clear()
    cfg = compose_config(tmp_path, [*SMALL_RUN, f"ckpt_path={small_checkpoint}"])  # max_epochs=1: reached
    check_resume(cfg, checkpoint, small_checkpoint)
    assert f"at step {step} after 1 epochs: it has reached trainer.max_epochs=1 already, so nothing is trained" \
        in caplog.text
    assert "ignored on a resume" not in caplog.text  # the checkpoint's own tokenizer settings
