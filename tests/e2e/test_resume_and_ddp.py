"""A run resumed mid-epoch continues with the same remaining batches; BLEU under DDP equals
single-process BLEU."""

import json
from pathlib import Path

import lightning as L
import pytest

from tests.helpers import compose_config, run_py
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow
SMALL = ["data.corpus.num_train=600", "data.corpus.num_val=20", "data.corpus.num_test=20", "data.max_tokens=512",
         "trainer.max_epochs=1", "trainer.limit_val_batches=0", "~callbacks.epoch_checkpoint"]


class BatchRecorder(L.Callback):
    """Appends the example ids of every training batch to a JSON-lines file."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(batch["id"].tolist()) + "\n")


def recorder(path: Path) -> list[str]:
    return [f"+callbacks.recorder._target_={__name__}.BatchRecorder", f"+callbacks.recorder.path={path}"]


def batches(path: Path) -> list[list[int]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_resume_mid_epoch_continues_with_the_remaining_batches(tmp_path):
    cache = tmp_path / "cache"
    run(compose_config(tmp_path / "whole", [*SMALL, *recorder(tmp_path / "whole.jsonl")], cache_dir=cache))
    whole = batches(tmp_path / "whole.jsonl")
    assert len(whole) > 8
    stop = 5
    mid_epoch_checkpoint = ["+callbacks@callbacks.steps=step_checkpoint", f"callbacks.steps.every_n_train_steps={stop}"]
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
