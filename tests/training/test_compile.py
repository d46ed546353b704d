"""module.compile: the training step compiled by regions (one encoder layer, one decoder layer,
the loss's chunk), equal to the eager step, one graph per region whatever the batch shapes. On
the CPU most tests use the aot_eager backend (AOTAutograd's forward and backward graphs without
code generation); one runs inductor itself on the packed step a GPU runs (about a minute here)."""

import json
from pathlib import Path

import lightning as L
import pytest
import torch
from torch._dynamo import register_backend

from tests import varlen_cpu  # noqa: F401  (a CPU kernel for torch's varlen attention op)
from tests.helpers import compose_config, make_model, ragged_batch
from transformer_mt.data.shape_grid import ShapeGrid
from transformer_mt.errors import ConfigError
from transformer_mt.model import attention
from transformer_mt.schema.keys import check_keys
from transformer_mt.tasks.train import run
from transformer_mt.training.compiled import RecompileLimitHit, compiled_step
from transformer_mt.training.loss import output_layer_loss

GRAPHS: set[tuple[int, int]] = set()  # (frame, compilation of that frame) of each graph compiled


def counting(backend: str):
    """`backend`, recording which frame each graph is compiled for, and the how-manyth compilation
    of that frame it is (a restarted analysis calls the backend again for the same graph)."""

    def compile_counted(gm, example_inputs):
        compile_id = torch._guards.CompileContext.current_compile_id()
        GRAPHS.add((compile_id.frame_id, compile_id.frame_compile_id))
        return torch._dynamo.lookup_backend(backend)(gm, example_inputs)

    return compile_counted


register_backend(counting("aot_eager"), name="counted_aot_eager")
register_backend(counting("inductor"), name="counted_inductor")


def graphs_per_region() -> list[int]:
    """How many graphs each compiled function (frame) got."""
    frames = sorted({frame for frame, _ in GRAPHS})
    return [sum(1 for f, _ in GRAPHS if f == frame) for frame in frames]


def step(model, compiled, batch: dict):
    """The training step's loss and gradients, as TranslationModule computes them."""
    model.zero_grad()
    out = model.output_proj
    states = model.features(batch["src"], batch["tgt_in"], batch.get("packing"), compiled and compiled.runners)
    loss = output_layer_loss(states, out.weight, out.bias, batch["tgt_out"], 0.1, 0, chunk_rows=16,
                             chunk_fn=compiled and compiled.chunk)[0]
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def lengths(rows: int, longest: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return [longest, *torch.randint(1, longest + 1, (rows - 1,), generator=g).tolist()]


# (rows, longest source, longest target): the first batch has S == T. No size is 1: torch
# specializes sizes 0 and 1, so a batch of one sentence compiles a graph of its own (once)
SHAPES = [(4, 9, 9), (8, 16, 11), (3, 5, 24), (16, 8, 8), (2, 30, 3), (5, 12, 13), (7, 2, 9), (2, 6, 6),
          (12, 20, 17), (6, 11, 4)]


@pytest.mark.parametrize(("packed", "positional"), [(False, "sinusoidal"), (True, "sinusoidal"), (False, "rotary"),
                                                    (True, "rotary"), (False, "relative")])  # relative: not packed
def test_regional_compilation_is_one_graph_per_region_for_any_batch_shape_and_equals_eager(packed, positional):
    """module.compile: one encoder layer, one decoder layer and the loss's chunk, each compiled
    once (fullgraph: a graph break would be an error) for ten batch shapes, the first with equal
    source and target lengths; loss and every gradient equal the eager step's."""
    torch._dynamo.reset()
    GRAPHS.clear()
    model = make_model(dropout=0.0, positional=positional).train()
    compiled = compiled_step("counted_aot_eager")
    for batch in batches_of_many_shapes(packed):
        eager_loss, eager_grads = step(model, None, batch)
        loss, grads = step(model, compiled, batch)
        torch.testing.assert_close(loss, eager_loss, atol=1e-5, rtol=1e-5)
        assert grads.keys() == eager_grads.keys()
        for name in grads:
            torch.testing.assert_close(grads[name], eager_grads[name], atol=1e-5, rtol=1e-4, msg=name)
    assert graphs_per_region() == [1, 1, 1], sorted(GRAPHS)


def batches_of_many_shapes(packed: bool, shapes=SHAPES) -> list[dict]:
    return [ragged_batch(lengths(rows, src_len, seed), lengths(rows, tgt_len - 1, seed + 100), seed, packed=packed)
            for seed, (rows, src_len, tgt_len) in enumerate(shapes)]


@pytest.mark.slow
def test_the_packed_step_of_a_gpu_compiles_with_inductor_in_one_graph_per_region_and_equals_eager(monkeypatch):
    """On a GPU the packed step calls torch's varlen attention op inside the compiled layers. With a
    CPU kernel for that op (tests/varlen_cpu.py) the same layers go through inductor here, with
    dropout 0.1 (inductor drawing its random numbers as eager does: fallback_random): over batches
    of many shapes, loss and gradients equal the eager step's, and inductor makes one graph per
    region, as aot_eager does (test_regional_compilation_...[packed])."""
    monkeypatch.setattr(attention, "VARLEN_DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(attention, "VARLEN_DTYPES", (torch.float32,))
    model = make_model(dropout=0.1).train()
    assert attention.uses_varlen_kernel(torch.zeros(2, 2), model.config.attention_dropout)
    torch._dynamo.reset()
    GRAPHS.clear()
    compiled = compiled_step("counted_inductor")
    with torch._inductor.config.patch(fallback_random=True):
        for seed, batch in enumerate(batches_of_many_shapes(packed=True, shapes=SHAPES[:6])):
            torch.manual_seed(seed)
            eager_loss, eager_grads = step(model, None, batch)
            torch.manual_seed(seed)
            loss, grads = step(model, compiled, batch)
            torch.testing.assert_close(loss, eager_loss, atol=1e-4, rtol=1e-5)
            for name in eager_grads:
                torch.testing.assert_close(grads[name], eager_grads[name], atol=1e-5, rtol=1e-4, msg=name)
    assert graphs_per_region() == [1, 1, 1], sorted(GRAPHS)


def test_a_region_past_torchs_recompile_limit_stops_the_run_in_one_line_after_logging_why(capfd):
    """fullgraph=True turns torch's recompile limit into a hard failure: the run says in one line
    which region and what to do, and torch's `recompiles` log has said why it compiled again."""
    torch._dynamo.reset()
    model = make_model(dropout=0.0).train()
    encoder = compiled_step("counted_aot_eager").runners.encoder  # the encoder's region alone
    with torch._dynamo.config.patch(recompile_limit=1):
        model.encode(ragged_batch([5, 3, 4], [4, 6, 2], seed=1)["src"], run=encoder)
        with pytest.raises(RecompileLimitHit, match=r"^module.compile: the encoder layer was compiled more than its "
                           r"limit .*recompile_limit=1; .* Train with module.compile=false \(resume from "
                           r"checkpoints/last.ckpt\)"):
            model.encode(ragged_batch([5], [4], seed=2)["src"], run=encoder)  # one sentence: sizes of 1 are specialized
    assert "Recompiling function compiled_encoder_layer" in capfd.readouterr().err
    torch._dynamo.reset()


def test_a_backend_that_does_not_exist_is_a_config_error():
    with pytest.raises(ConfigError, match=r"module.compile='inductr': not a torch.compile backend"):
        compiled_step("inductr")
    assert compiled_step(False) is None


class BatchShapes(L.Callback):
    """The (rows, source length, target length) of every training batch, written to `path`."""

    def __init__(self, path: str) -> None:
        self.path, self.shapes = Path(path), []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.shapes.append([*batch["src"].shape, batch["tgt_in"].size(1)])

    def on_train_end(self, trainer, pl_module) -> None:
        self.path.write_text(json.dumps(self.shapes))


def test_an_epoch_of_token_budget_batches_compiles_three_graphs(tmp_path):
    """A real run with module.compile: an epoch of token-budget batches of many shapes compiles
    one graph per region."""
    torch._dynamo.reset()
    GRAPHS.clear()
    metrics = run(compose_config(tmp_path / "run", [
        "model=tiny", "module.compile=counted_aot_eager", "trainer.max_epochs=1", "data.corpora.toy.num_train=400",
        "data.corpora.toy.num_val=10", "data.corpora.toy.num_test=7", "data.max_tokens=300",
        "trainer.limit_val_batches=0", f"+callbacks.shapes._target_={__name__}.BatchShapes",
        f"+callbacks.shapes.path={tmp_path / 'shapes.json'}"]))
    shapes = {tuple(s) for s in json.loads((tmp_path / "shapes.json").read_text())}
    assert len(shapes) >= 10, shapes
    assert graphs_per_region() == [1, 1, 1], (sorted(GRAPHS), sorted(shapes))
    assert metrics["steps"] > 10 and metrics["test/bleu"] >= 0


def grid_batches(grid: ShapeGrid, count: int) -> list[dict]:
    """`count` batches of random pairs, each padded to its shape of `grid` (a ShapeGrid), the shapes in turn."""
    import numpy as np
    import pyarrow as pa

    from transformer_mt.data.batching import Collator

    batches, rng = [], np.random.default_rng(0)
    for i in range(count):
        rows, length = grid.shapes()[i % len(grid.shapes())]
        low = grid.lengths[i % len(grid.lengths) - 1] + 1 if i % len(grid.lengths) else 2
        n = int(rng.integers(1, rows + 1))
        src = [[*rng.integers(4, 50, int(rng.integers(low, length + 1)) - 1).tolist(), 2]
               for _ in range(n)]
        tgt = [rng.integers(4, 50, int(rng.integers(1, length))).tolist() for _ in range(n)]
        ids = pa.list_(pa.int32())
        table = pa.table({"src_ids": pa.array(src, ids), "tgt_ids": pa.array(tgt, ids), "id": pa.array(range(n))})
        batches.append(Collator(0, 1, 2, grid=grid)(table))
    return batches


def test_on_the_shape_grid_inductor_compiles_each_shape_once_and_never_again():
    """module.compile with data.shape_grid: the layers on static shapes through inductor (mode
    reduce-overhead, whose CUDA graphs a CPU skips): the encoder layer's region (forward and
    backward; the decoder's takes the same path, checked with aot_eager over whole runs below) gets
    one graph per shape and none once the grid is covered (fail_on_recompile), with the eager
    layers' outputs and gradients."""
    from torch._dynamo.utils import counters

    grid = ShapeGrid((6, 12), (5, 3))
    torch._dynamo.reset()
    counters.clear()
    model = make_model(dropout=0.0).train()
    encoder = compiled_step(True, shape_grid=2, mode="reduce-overhead").runners.encoder
    batches = grid_batches(grid, 5)
    assert [tuple(b["src"].shape) for b in batches] == [(5, 6), (3, 12), (5, 6), (3, 12), (5, 6)]
    for i, batch in enumerate(batches):
        results = []
        for run_layer in (None, encoder):
            model.zero_grad()
            with torch.compiler.set_stance("fail_on_recompile" if i >= 2 and run_layer else "default"):
                out = model.encode(batch["src"], **({"run": run_layer} if run_layer else {}))
            out.pow(2).sum().backward()
            results.append((out.detach(), [p.grad.clone() for p in model.encoder_layers.parameters()]))
        (eager, eager_grads), (compiled, grads) = results
        torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)
        for a, b in zip(grads, eager_grads, strict=True):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    assert counters["stats"]["unique_graphs"] == 2  # one per shape


def test_a_compile_mode_needs_inductor_and_a_known_name(tmp_path):
    with pytest.raises(ConfigError, match=r"module.compile_mode='fast'"):
        check_keys(compose_config(tmp_path, ["module.compile=true", "module.compile_mode=fast"]))
    with pytest.raises(ConfigError, match=r"module.compile_mode=reduce-overhead: a mode of inductor's, not of "
                                          r"module.compile=aot_eager"):
        check_keys(compose_config(tmp_path, ["module.compile=aot_eager", "module.compile_mode=reduce-overhead"]))


class GraphsPerEpoch(L.Callback):
    """graphs_per_region() at the end of every training epoch, written to `path`."""

    def __init__(self, path: str) -> None:
        self.path, self.counts = Path(path), []

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.counts.append(graphs_per_region())
        self.path.write_text(json.dumps(self.counts))


def test_two_epochs_on_the_shape_grid_compile_one_graph_per_shape_in_the_first_and_none_after(tmp_path):
    """A real run with module.compile and data.shape_grid=3: every training batch has one of the
    grid's at most 3 shapes, the layers get one graph per shape used, and the second epoch
    compiles nothing."""
    torch._dynamo.reset()
    GRAPHS.clear()
    run(compose_config(tmp_path / "run", [
        "model=tiny", "module.compile=counted_aot_eager", "data.shape_grid=3", "trainer.max_epochs=2",
        "data.corpora.toy.num_train=400", "data.corpora.toy.num_val=10", "data.corpora.toy.num_test=7",
        "data.max_tokens=300", "trainer.limit_val_batches=0", f"+callbacks.shapes._target_={__name__}.BatchShapes",
        f"+callbacks.shapes.path={tmp_path / 'shapes.json'}", f"+callbacks.graphs._target_={__name__}.GraphsPerEpoch",
        f"+callbacks.graphs.path={tmp_path / 'graphs.json'}"]))
    shapes = {tuple(s) for s in json.loads((tmp_path / "shapes.json").read_text())}
    first, second = json.loads((tmp_path / "graphs.json").read_text())
    assert len(shapes) <= 3 and all(src == tgt for _, src, tgt in shapes), shapes
    assert first == [len(shapes), len(shapes), 1], (first, shapes)
    assert second == first  # the second epoch's batches, on the same shapes, compile nothing
