"""module.compile: the training step compiled as whole graphs, equal to the eager step, compiled a
handful of times per epoch of token-budget batches. On the CPU the tests use the aot_eager backend
(AOTAutograd's forward and backward graphs without code generation: inductor takes minutes here)."""

import json
from pathlib import Path

import lightning as L
import pytest
import torch
from torch._dynamo import register_backend

from tests.helpers import compose_config, make_model
from transformer_mt.errors import ConfigError
from transformer_mt.tasks.train import run
from transformer_mt.training.loss import output_layer_loss
from transformer_mt.training.module import compiled_step

COMPILATIONS: list[int] = []  # one entry (graph size) per graph that torch.compile compiles


@register_backend
def counted_aot_eager(gm, example_inputs):
    """aot_eager, counting the graphs it is given (torch calls a backend once per compilation)."""
    COMPILATIONS.append(len(gm.graph.nodes))
    return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)


def step(model, features, chunk, src, tgt_in, tgt_out):
    """The training step's loss and gradients, as TranslationModule computes them."""
    model.zero_grad()
    out = model.output_proj
    loss = output_layer_loss(features(src, tgt_in), out.weight, out.bias, tgt_out, 0.1, 0, chunk_rows=16,
                             chunk_fn=chunk)[0]
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def padded_batch(rows: int, src_len: int, tgt_len: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 50, (rows, src_len), generator=g)
    tgt = torch.randint(4, 50, (rows, tgt_len + 1), generator=g)
    for row in range(1, rows):  # right padding of random lengths
        src[row, torch.randint(1, src_len, (), generator=g):] = 0
        tgt[row, torch.randint(2, tgt_len + 1, (), generator=g):] = 0
    tgt[:, 0] = 1
    return src, tgt[:, :-1], tgt[:, 1:]


def test_the_compiled_step_is_one_graph_each_and_equals_the_eager_step():
    """fullgraph=True: a graph break would be an error. Loss and every gradient equal the eager
    step's within float tolerance, on padded batches of several shapes (one compiled graph serves
    them all: dynamic shapes)."""
    model = make_model(dropout=0.0).train()
    features, chunk = compiled_step(model, "counted_aot_eager")
    COMPILATIONS.clear()
    for seed, shape in enumerate([(4, 9, 7), (8, 16, 16), (3, 5, 24), (16, 8, 8)]):
        if seed == 1:
            after_first = len(COMPILATIONS)
        batch = padded_batch(*shape, seed)
        eager_loss, eager_grads = step(model, model.features, None, *batch)
        loss, grads = step(model, features, chunk, *batch)
        torch.testing.assert_close(loss, eager_loss, atol=1e-5, rtol=1e-5)
        assert grads.keys() == eager_grads.keys()
        for name in grads:
            torch.testing.assert_close(grads[name], eager_grads[name], atol=1e-5, rtol=1e-4, msg=name)
    # the first batch compiles the decoder states (dynamic shapes) and the chunk body for a full
    # chunk and for any other size; the other shapes compile nothing
    assert 2 <= after_first <= 4 and len(COMPILATIONS) == after_first, COMPILATIONS


def test_a_backend_that_does_not_exist_is_a_config_error():
    with pytest.raises(ConfigError, match=r"module.compile='inductr': not a torch.compile backend"):
        compiled_step(make_model(), "inductr")
    assert compiled_step(make_model(), False) == (None, None)


class BatchShapes(L.Callback):
    """The (rows, source length, target length) of every training batch, written to `path`."""

    def __init__(self, path: str) -> None:
        self.path, self.shapes = Path(path), []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.shapes.append([*batch["src"].shape, batch["tgt_in"].size(1)])

    def on_train_end(self, trainer, pl_module) -> None:
        self.path.write_text(json.dumps(self.shapes))


def test_an_epoch_of_token_budget_batches_compiles_a_handful_of_times(tmp_path):
    """A real run with module.compile: two epochs of token-budget batches of many shapes, each
    shape compiled at most once and most not at all."""
    COMPILATIONS.clear()
    metrics = run(compose_config(tmp_path / "run", [
        "model=tiny", "module.compile=counted_aot_eager", "trainer.max_epochs=2", "data.corpus.num_train=400",
        "data.corpus.num_val=10", "data.corpus.num_test=7", "data.max_tokens=300", "trainer.limit_val_batches=0",
        f"+callbacks.shapes._target_={__name__}.BatchShapes", f"+callbacks.shapes.path={tmp_path / 'shapes.json'}"]))
    shapes = {tuple(s) for s in json.loads((tmp_path / "shapes.json").read_text())}
    assert len(shapes) >= 10, shapes
    assert len(COMPILATIONS) <= 4, (COMPILATIONS, sorted(shapes))
    assert metrics["steps"] > 20 and metrics["test/bleu"] >= 0
