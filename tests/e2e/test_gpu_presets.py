"""What the GPU presets set, composed on the CPU: TF32 for float32 matmuls, the paper's batch on one
card, and packed attention refused where torch's varlen kernel cannot run it."""

from dataclasses import dataclass
from typing import Any

import pytest
import torch
from hydra.core.config_store import ConfigStore

from tests.helpers import compose_config
from transformer_mt.errors import ConfigError, find_user_error
from transformer_mt.model import attention
from transformer_mt.schema.keys import key
from transformer_mt.schema.task_base import Task
from transformer_mt.tasks import run
from transformer_mt.tasks.runs import config_checks as checks
from transformer_mt.tasks.runs.config_checks import packed_refusal
from transformer_mt.tasks.runs.start import UpdatePlan, update_plan
from transformer_mt.validate import refuse

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile

SEEN: list[str] = []


def record_precision(cfg) -> dict:
    """A task that records the float32 matmul precision it runs under."""
    SEEN.append(torch.get_float32_matmul_precision())
    return {}


@dataclass
class RecordPrecision(Task):
    """python run.py task=record_precision: the float32 matmul precision it runs under, recorded."""

    name: Any = key("record_precision", "the task's name (set by task=NAME)")
    runner = staticmethod(record_precision)


def test_float32_matmul_precision_holds_while_the_task_runs_and_trainer_gpu_sets_tf32(tmp_path):
    assert compose_config(tmp_path).float32_matmul_precision == "highest"  # torch's default: CPU runs unchanged
    assert compose_config(tmp_path, ["trainer=gpu"]).float32_matmul_precision == "high"
    SEEN.clear()
    before = torch.get_float32_matmul_precision()
    ConfigStore.instance().store(group="task", name="record_precision", node=RecordPrecision)
    run(compose_config(tmp_path, ["float32_matmul_precision=high", "task=record_precision"]))
    assert SEEN == ["high"] and torch.get_float32_matmul_precision() == before
    with pytest.raises(ConfigError, match=r"^float32_matmul_precision='tf32': must be highest, high"):
        run(compose_config(tmp_path, ["float32_matmul_precision=tf32", "task=record_precision"]))


@pytest.mark.parametrize("experiment", [[], ["experiment=multi30k_recipe"], ["experiment=paper/wmt14_en_de_big"]])
def test_trainer_gpu_holds_what_the_h100_measured_best(tmp_path, experiment):
    """experiments/gpu/README.md (H100, 2026-11-28): the compiled step (base 1.33x, big 1.10x eager),
    padded batches (packed ran at 0.96x eager, 0.76x compiled), lengths not rounded, 4 workers; the
    command line still decides."""
    cfg = compose_config(tmp_path, ["trainer=gpu", *experiment])
    assert (cfg.module.compile, cfg.data.packed, cfg.data.pad_to_multiple, cfg.data.num_workers) == (True, False, 1, 4)
    assert cfg.trainer.precision == ("32-true" if "multi30k" in str(experiment) else "bf16-mixed")  # the recipe's
    assert compose_config(tmp_path, ["trainer=gpu", *experiment, "module.compile=false"]).module.compile is False
    assert compose_config(tmp_path, experiment).module.compile is False  # the CPU's default: minutes of compiling


@pytest.mark.parametrize("preset", ["paper/wmt14_en_de_base", "paper/wmt14_en_de_big", "paper/wmt14_en_fr_big"])
def test_the_paper_presets_take_a_whole_update_on_one_80_gb_card(tmp_path, preset):
    """25,000 tokens a batch (H200 peaks at 25k tokens: base 7.4 GB, big 15.7 GB): one GPU needs no
    accumulation, and 8 GPUs still see 25,000 tokens an update."""
    cfg = compose_config(tmp_path, [f"experiment={preset}", "trainer=gpu"])
    assert cfg.data.max_tokens == 25_000 and cfg.trainer.precision == "bf16-mixed"
    assert cfg.float32_matmul_precision == "high"
    assert update_plan(cfg, 1, 1) == UpdatePlan(processes=1, accumulation=1, batch_tokens=25_000)  # 1 card
    assert update_plan(cfg, 8, 1) == UpdatePlan(processes=8, accumulation=1, batch_tokens=3125)  # 8 cards


@pytest.mark.parametrize("overrides, reason", [
    (["trainer.precision=32-true"], "trainer.precision=32-true: the kernel takes bf16 or fp16"),
    (["model.attention_dropout=0.1"], "model.attention_dropout=0.1: the kernel has no attention dropout"),
    ([], "has no varlen_attn taking window_size="),  # varlen_attn set to None below
])
def test_packed_training_on_a_gpu_is_refused_where_the_varlen_kernel_cannot_run(tmp_path, monkeypatch, overrides,
                                                                                reason):
    """data.packed=true on a GPU falls back to the exact reference (slower than padding) in fp32, with
    attention dropout, or on a torch without the kernel as we call it: one line naming the key."""
    monkeypatch.setattr(checks, "on_gpu", lambda trainer: True)
    if not overrides:
        monkeypatch.setattr(attention, "varlen_attn", None)
    cfg = compose_config(tmp_path, ["trainer=gpu", "data.packed=true", *overrides])
    with pytest.raises(ConfigError, match=r"^data.packed=true: torch's varlen attention kernel cannot run \(") as err:
        refuse(packed_refusal(cfg))
    assert reason in str(err.value) and str(err.value).endswith("set data.packed=false")


def test_packed_training_where_the_kernel_runs_or_on_a_cpu_is_accepted(tmp_path, monkeypatch):
    cfg = compose_config(tmp_path, ["trainer=gpu", "data.packed=true", "model.attention_dropout=0.1"])
    assert packed_refusal(cfg) is None  # no GPU here: packing takes the reference, as every CPU run does
    monkeypatch.setattr(checks, "on_gpu", lambda trainer: True)
    assert packed_refusal(compose_config(tmp_path, ["trainer=gpu", "data.packed=true"])) is None  # bf16, no dropout
    assert packed_refusal(compose_config(tmp_path, ["trainer=gpu", "trainer.precision=16-mixed",
                                                    "data.packed=true"])) is None


def test_a_training_run_checks_packing_before_any_data_work(tmp_path, monkeypatch):
    monkeypatch.setattr(checks, "on_gpu", lambda trainer: True)  # a CPU trainer, as a GPU one would be checked
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    with pytest.raises(Exception) as err:
        run(compose_config(tmp_path, ["data.packed=true", "trainer.precision=bf16-mixed",
                                      "model.attention_dropout=0.1"]))
    assert "model.attention_dropout=0.1: the kernel has no attention dropout" in str(find_user_error(err.value))
    assert not (tmp_path / ".cache").exists()
