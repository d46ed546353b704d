"""module.activation_checkpointing=true: each layer's activations recomputed in the backward pass
(Runners.checkpointed), dropout drawing the same masks again, so the gradients are those of the
plain step exactly, and a whole run ends with the same weights."""

import torch

from tests.helpers import compose_config, make_model, padded_sources
from transformer_mt.model.transformer import Runners
from transformer_mt.tasks import run


def gradients(runners: Runners) -> dict[str, torch.Tensor]:
    """The gradients of a training-mode step (dropout 0.1) of the helpers' model through `runners`."""
    model = make_model(dropout=0.1, attention_dropout=0.1).train()
    src = padded_sources()
    torch.manual_seed(5)
    model.features(src, src[:, :6], runners=runners).square().sum().backward()
    return {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


def test_checkpointed_layers_give_the_plain_steps_gradients_exactly():
    plain, checkpointed = gradients(Runners()), gradients(Runners().checkpointed())
    assert plain.keys() == checkpointed.keys() and len(plain) > 20
    assert all(torch.equal(plain[name], checkpointed[name]) for name in plain)


def test_a_run_with_activation_checkpointing_ends_with_the_same_weights(tmp_path, monkeypatch):
    """Four steps of model=tiny with and without the switch: the same weights, bit for bit; the
    checkpointed run recomputed its layers (torch.utils.checkpoint ran; in the plain run, never)."""
    calls = []
    original = torch.utils.checkpoint.checkpoint
    monkeypatch.setattr(torch.utils.checkpoint, "checkpoint", lambda *a, **k: calls.append(1) or original(*a, **k))
    common = ["model=tiny", "trainer.max_steps=4", "data.corpora.toy.num_train=100", "data.corpora.toy.num_val=4",
              "data.corpora.toy.num_test=4", "data.max_tokens=256", "trainer.limit_val_batches=0"]
    counts = []
    for name, switch in (("plain", "false"), ("checkpointed", "true")):
        run(compose_config(tmp_path / name, [*common, f"module.activation_checkpointing={switch}"],
                           cache_dir=tmp_path / "cache"))
        counts.append(len(calls))
    assert counts[0] == 0 and counts[1] >= 4 * 2  # each step: every layer of both stacks
    weights = [torch.load(tmp_path / name / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
               for name in ("plain", "checkpointed")]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
