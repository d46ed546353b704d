"""A training step that does not log never waits for the device: recorded on the CPU, under a
TorchDispatchMode, as the ops that would force a host synchronization on a GPU."""

import json
import traceback
from pathlib import Path

import lightning as L
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.helpers import compose_config
from transformer_mt.tasks.train import run
from transformer_mt.training.steps import logged_step

aten = torch.ops.aten

# ops whose result the host must read from the device (a value, or a data-dependent shape)
SYNCING = {aten._local_scalar_dense.default, aten.is_nonzero.default, aten.equal.default, aten.nonzero.default,
           aten.masked_select.default, aten.repeat_interleave.Tensor, aten._unique2.default,
           aten.unique_consecutive.default, aten.unique_dim.default}
INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}
COPIES = {aten._to_copy.default, aten.copy_.default}


def forces_sync(func, args, kwargs) -> bool:
    """Whether `func(*args, **kwargs)` makes the host wait for a GPU: a scalar read, a shape that
    depends on values (nonzero, boolean-mask indexing), or a copy from the device to the host."""
    if func in SYNCING:
        return True
    if func in INDEXING:  # tensor[mask] with a boolean mask is a nonzero
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)
    if func in COPIES:
        source = args[1] if func is aten.copy_.default else args[0]
        target = args[0].device if func is aten.copy_.default else kwargs.get("device", source.device)
        return source.device.type != "cpu" and torch.device(target).type == "cpu"
    return False


def caller() -> str:
    """The innermost frames outside torch: where the op was asked for."""
    frames = [f for f in traceback.extract_stack() if "/torch/" not in f.filename and __file__ != f.filename]
    return " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in frames[-9:][::-1])


class SyncLog(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if forces_sync(func, args, kwargs):
            self.ops.append(f"{func} at {caller()}")
        return func(*args, **kwargs)


class RecordSyncs(L.Callback):
    """From each training batch's start to the next one's (its step, optimizer, callbacks, logging
    and the loading of the next batch): the syncing ops, per optimizer step, with whether Lightning
    logs that step. Written to `path` as JSON at the end of training."""

    def __init__(self, path: str) -> None:
        self.path, self.mode, self.steps = Path(path), None, []

    def stop(self) -> None:
        if self.mode is not None:
            self.mode.__exit__(None, None, None)
            self.steps[-1]["ops"] = self.mode.ops
            self.mode = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.stop()
        step = trainer.global_step + 1
        self.steps.append({"step": step, "logged": logged_step(trainer, step)})
        self.mode = SyncLog()
        self.mode.__enter__()

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        self.steps[-1]["saved"] = True  # writing a checkpoint reads the weights: not a plain step

    def on_train_end(self, trainer, pl_module) -> None:
        self.stop()
        self.path.write_text(json.dumps(self.steps))


@pytest.mark.parametrize("overrides", [
    # the paper's base model, gradients clipped, two batches per optimizer step: one quiet step (its
    # two batches), then a logging one (in float32: a CPU without AVX-512 BF16 takes 10 s a bf16 step)
    ["model=base", "trainer.gradient_clip_val=1.0", "trainer.accumulate_grad_batches=2", "trainer.max_steps=2",
     "trainer.log_every_n_steps=2", "data.max_tokens=64", "trainer.limit_test_batches=1",
     "decoding.options.max_len_b=5"],
    # packed batches (data.packed) in bf16-mixed: the collator's layout, the reference attention, the
    # loss, the precision plugin's autocast
    ["model=tiny", "data.packed=true", "trainer.precision=bf16-mixed", "trainer.max_steps=9",
     "trainer.log_every_n_steps=4", "data.max_tokens=256"],
], ids=["base", "tiny-packed-bf16"])
def test_a_training_step_that_does_not_log_never_syncs(tmp_path, overrides):
    record = tmp_path / "syncs.json"
    run(compose_config(tmp_path / "run", [
        *overrides, "data.corpora.toy.num_train=300", "data.corpora.toy.num_val=10", "data.corpora.toy.num_test=7",
        "trainer.limit_val_batches=0",
        f"+callbacks.syncs._target_={__name__}.RecordSyncs", f"+callbacks.syncs.path={record}"]))
    steps = json.loads(record.read_text())
    quiet = [s for s in steps if not s["logged"] and not s.get("saved")]
    assert len(quiet) >= 2, steps  # the test sees non-logging steps (each batch of a step counts)
    assert all(not s["ops"] for s in quiet), [s for s in quiet if s["ops"]]
    # the recorder sees syncs where there are some: logging steps read the loss for the loggers
    assert any(s["ops"] for s in steps if s["logged"]), steps
