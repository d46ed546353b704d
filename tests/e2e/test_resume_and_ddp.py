"""A run resumed mid-epoch continues with the same remaining batches; BLEU under DDP equals
single-process BLEU."""

import json
import time
from pathlib import Path

import lightning as L
import pytest
import torch

from tests.helpers import compose_config, run_py
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow
SMALL = ["data.corpora.toy.num_train=600", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20",
         "data.max_tokens=512", "trainer.max_epochs=1", "trainer.limit_val_batches=0", "~callbacks.epoch_checkpoint"]


class BatchRecorder(L.Callback):
    """Appends the example ids of every training batch to a JSON-lines file."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(batch["id"].tolist()) + "\n")


def recorder(path: Path) -> list[str]:
    return [f"+callbacks.recorder._target_={__name__}.BatchRecorder", f"+callbacks.recorder.path={path}"]


class TrainEnd(L.Callback):
    """Writes the Timer's training seconds at the end of fitting (before the test) to a file."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_end(self, trainer, module) -> None:
        (timer,) = [c for c in trainer.callbacks if isinstance(c, L.pytorch.callbacks.Timer)]
        self.path.write_text(str(timer.time_elapsed("train")))


def batches(path: Path) -> list[list[int]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_resume_mid_epoch_continues_with_the_remaining_batches(tmp_path):
    cache = tmp_path / "cache"
    run(compose_config(tmp_path / "whole", [*SMALL, *recorder(tmp_path / "whole.jsonl")], cache_dir=cache))
    whole = batches(tmp_path / "whole.jsonl")
    assert len(whole) > 8
    stop = 5
    mid_epoch_checkpoint = ["callbacks=step_checkpoints", f"callbacks.steps.every_n_train_steps={stop}"]
    interrupted = [*SMALL, *recorder(tmp_path / "first.jsonl"), f"trainer.max_steps={stop + 2}", *mid_epoch_checkpoint]
    run(compose_config(tmp_path / "first", interrupted, cache_dir=cache))
    assert batches(tmp_path / "first.jsonl") == whole[: stop + 2]
    step_checkpoint = tmp_path / "first" / "checkpoints" / "steps" / "step0000005.ckpt"  # passed as written
    resumed = [*SMALL, *recorder(tmp_path / "rest.jsonl"), f"ckpt_path={step_checkpoint}"]
    run(compose_config(tmp_path / "rest", resumed, cache_dir=cache))
    assert batches(tmp_path / "rest.jsonl") == whole[stop:]


def test_bleu_under_ddp_equals_single_process_bleu(toy_run, tmp_path):
    out, _ = toy_run
    common = ["task=evaluate", f"ckpt_path={out}/checkpoints/best.ckpt", "data.split=val"]
    single = run(compose_config(tmp_path / "single", common))
    result = run_py(*common, "trainer=ddp_cpu", f"hydra.run.dir={tmp_path}/ddp", f"paths.cache_dir={tmp_path}/c",
                    timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    ddp = json.loads((tmp_path / "ddp" / "metrics.json").read_text())
    assert ddp["val/bleu"] == single["val/bleu"] and ddp["val/chrf"] == single["val/chrf"]
    assert (tmp_path / "ddp" / "val.translations.txt").read_text() == \
        (tmp_path / "single" / "val.translations.txt").read_text()


def test_two_nodes_train_as_two_processes_of_one_node(ddp_run, tmp_path):
    """Multi-node DDP as Lightning runs it: two `run.py` processes, NODE_RANK 0 and 1, one process per
    node, meeting at MASTER_ADDR and sharing one run directory and data cache (a shared filesystem).
    They take the same steps as `trainer=ddp_cpu` (two processes on one node: conftest's `ddp_run`,
    the same DDP_RUN), reach the same validation BLEU and weights within float rounding, and only rank
    0 writes metrics and checkpoints. tokens_per_update plans the same accumulation for both, from
    Lightning's count of the processes."""
    import os
    import socket
    import subprocess

    import torch

    from tests.helpers import DDP_RUN, ROOT, python

    ddp = [*DDP_RUN, f"paths.cache_dir={ddp_run}/cache"]  # tokens_per_update=2048: 2 processes x 512 tokens x 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    nodes = []
    for node in (0, 1):
        env = {**os.environ, "PYTHONWARNINGS": "ignore", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "NODE_RANK": str(node)}
        nodes.append(subprocess.Popen(
            [python(env), str(ROOT / "run.py"), *ddp, "trainer.devices=1", "trainer.num_nodes=2",
             f"hydra.run.dir={tmp_path}/two_nodes"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True))
    printed = []
    for process in nodes:
        out, err = process.communicate(timeout=900)
        assert process.returncode == 0, err[-3000:]
        printed.append(out)
    assert "test/bleu" in printed[0] and "test/bleu" not in printed[1]  # rank 1 writes and prints no result
    one_node, two_nodes = ddp_run / "run", tmp_path / "two_nodes"
    whole, split = (json.loads((run_dir / "metrics.json").read_text()) for run_dir in (one_node, two_nodes))
    assert split["steps"] == whole["steps"] > 0 and split["val/bleu_best"] == whole["val/bleu_best"]
    for run_dir, where in ((one_node, "2 device(s) x 1 node(s)"), (two_nodes, "1 device(s) x 2 node(s)")):
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert (metrics["accumulate_grad_batches"], metrics["batch_tokens"]) == (2, 512)
        assert f"{where} x 512 tokens per batch x accumulation 2 = 2048" in (run_dir / "run.log").read_text()
    a = torch.load(one_node / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    b = torch.load(two_nodes / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-4
    written = sorted(p.name for p in two_nodes.iterdir() if p.suffix in (".json", ".txt"))
    assert written == ["metrics.json", "test.references.txt", "test.translations.txt"]  # one writer: none of rank 1


def test_a_resumed_run_counts_the_training_time_before_the_resume_and_max_time_stops_it(tmp_path):
    """metrics.json's train_seconds (task=report's "train (min)") is the whole run's: the seconds in
    the checkpoint resumed from (Lightning's Timer keeps them), plus those after the resume; and the
    same Timer still stops a run at trainer.max_time."""
    cache = tmp_path / "cache"
    first = run(compose_config(tmp_path / "first", SMALL, cache_dir=cache))
    checkpoint_path = tmp_path / "first" / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(checkpoint_path, weights_only=False)
    (key,) = [k for k in checkpoint["callbacks"] if k.startswith("Timer")]
    assert 0 < checkpoint["callbacks"][key]["time_elapsed"]["train"] == pytest.approx(first["train_seconds"], abs=1)
    checkpoint["callbacks"][key]["time_elapsed"]["train"] = 5000.0  # as if the first part had trained for long
    torch.save(checkpoint, checkpoint_path)
    started = time.monotonic()
    resumed = run(compose_config(tmp_path / "rest", [*SMALL, "trainer.max_epochs=2", f"ckpt_path={checkpoint_path}"],
                                 cache_dir=cache))
    assert resumed["epochs"] == 2 and 5000 < resumed["train_seconds"] < 5000 + time.monotonic() - started

    time_budget = [*SMALL, "trainer.max_epochs=1000", "trainer.max_time=00:00:00:01"]
    budget = run(compose_config(tmp_path / "budget", time_budget, cache_dir=cache))
    assert budget["epochs"] < 1000 and 1 <= budget["train_seconds"] < time.monotonic() - started


def test_train_seconds_is_the_time_fitting_took_also_when_the_best_checkpoint_is_tested(tmp_path):
    """Testing best.ckpt loads its Timer state; metrics.json's train_seconds is still the fitting's
    time (it once counted the tested checkpoint's seconds a second time: twice the training time)."""
    validated = [*(o for o in SMALL if not o.startswith("trainer.limit_val")), "trainer.max_epochs=2",
                 f"+callbacks.train_end._target_={__name__}.TrainEnd", f"+callbacks.train_end.path={tmp_path}/s"]
    metrics = run(compose_config(tmp_path / "run", validated, cache_dir=tmp_path / "cache"))
    assert metrics["tested_checkpoint"].endswith("best.ckpt")
    fitting = float((tmp_path / "s").read_text())
    assert fitting > 0.5 and metrics["train_seconds"] == pytest.approx(fitting, abs=0.1)
