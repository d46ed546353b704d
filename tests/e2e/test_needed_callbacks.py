"""What a training run needs, it has whatever `callbacks=` picks (conf/callbacks_always.yaml): with
callbacks=none the run writes the same kind of metrics.json, best.ckpt and last.ckpt, and stops on
SIGTERM as ever; removing one it needs is one line naming it."""

import json

import pytest

from tests.helpers import SMALL_RUN, assert_clean_failure, compose_config, interrupt_at, run_py
from transformer_mt.errors import ConfigError
from transformer_mt.schema.between_groups import NEEDED_CALLBACKS
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow


def test_callbacks_none_keeps_what_a_run_needs(tmp_path):
    metrics = run(compose_config(tmp_path, [*SMALL_RUN, "callbacks=none"]))
    assert set(compose_config(tmp_path, ["callbacks=none"]).callbacks) == set(NEEDED_CALLBACKS)
    assert metrics["tokens_per_sec"] > 0 and metrics["train_seconds"] > 0 and metrics["val/bleu_best"] is not None
    assert metrics["tested_checkpoint"] == str(tmp_path / "checkpoints" / "best.ckpt")
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    assert not (tmp_path / "checkpoints" / "epochs").exists() and not (tmp_path / "plots").exists()  # optional ones
    assert json.loads((tmp_path / "metrics.json").read_text())["steps"] == metrics["steps"]


def test_callbacks_none_stops_on_sigterm_with_last_ckpt_and_the_resume_hint(tmp_path):
    result = run_py(*SMALL_RUN, "callbacks=none", *interrupt_at(3, "SIGTERM"), f"hydra.run.dir={tmp_path}")
    assert result.returncode == 143, result.stderr[-2000:]
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert result.stderr.strip().splitlines()[-1] == \
        f"stopped by SIGTERM at step 4; {last} holds step 4: resume with ckpt_path={last}"


@pytest.mark.parametrize("removed", ["~callbacks.last_checkpoint", "callbacks.step_meter=null"])
def test_removing_a_callback_a_run_needs_is_one_line_naming_it(tmp_path, removed):
    name = removed.lstrip("~").split("=")[0].split(".")[1]
    with pytest.raises(ConfigError, match=rf"^callbacks.{name}: a training run needs it \("):
        run(compose_config(tmp_path, [*SMALL_RUN, removed]))
    result = run_py(*SMALL_RUN, removed, f"hydra.run.dir={tmp_path}/process")
    assert_clean_failure(result, f"callbacks.{name}: a training run needs it")
