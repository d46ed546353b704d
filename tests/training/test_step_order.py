"""The training step runs in the order training/steps.py writes down: loss, backward, gradient norm,
found_inf, clipping, optimizer step. Recorded over a real run; fails if any of them moves."""

import lightning as L
import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from tests.helpers import compose_config
from transformer_mt.tasks.train import run
from transformer_mt.training.guard import NonFiniteGuard
from transformer_mt.training.module import TranslationModule

EVENTS: list[str] = []
ORDER = ["loss", "backward", "grad_norm", "found_inf", "clip", "step"]


class RecordBackward(L.Callback):
    def on_after_backward(self, trainer, pl_module) -> None:
        EVENTS.append("backward")


def recorded(name: str, function):
    def wrapper(*args, **kwargs):
        EVENTS.append(name)
        return function(*args, **kwargs)
    return wrapper


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "not_fused"])
def test_the_training_step_runs_in_the_written_order(tmp_path, monkeypatch, fused):
    """The gradient norm (a callback, StepMeter) reads the gradients before the guard may drop
    them (the module's hook, after every callback's), and clipping comes after both: with a fused
    optimizer and without (where the guard drops a non-finite step's gradients itself)."""
    EVENTS.clear()
    monkeypatch.setattr(TranslationModule, "training_step", recorded("loss", TranslationModule.training_step))
    monkeypatch.setattr(torch.nn.utils, "get_total_norm", recorded("grad_norm", torch.nn.utils.get_total_norm))
    monkeypatch.setattr(NonFiniteGuard, "decide", recorded("found_inf", NonFiniteGuard.decide))
    monkeypatch.setattr(TranslationModule, "configure_gradient_clipping",
                        recorded("clip", TranslationModule.configure_gradient_clipping))
    hook = register_optimizer_step_post_hook(lambda *_: EVENTS.append("step"))
    try:
        run(compose_config(tmp_path, [
            "model=tiny", "trainer.max_steps=3", "trainer.log_every_n_steps=1", "trainer.gradient_clip_val=1.0",
            f"optim.optimizer.fused={str(fused).lower()}", "data.corpora.toy.num_train=100",
            "data.corpora.toy.num_val=4", "data.corpora.toy.num_test=4", "data.max_tokens=256",
            "trainer.limit_val_batches=0", f"+callbacks.zz_backward._target_={__name__}.RecordBackward"]))
    finally:
        hook.remove()
    assert EVENTS == ORDER * 3  # three optimizer steps (testing after them records nothing)
