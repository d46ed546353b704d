"""Behaviour comes from the composed config: the same values set by an experiment preset and on
the command line make the same run (its config, its fingerprints, its first steps) for a fine-tuning
run, task=evaluate and a pipeline's training stage."""

import pytest
import torch
from omegaconf import OmegaConf

from tests.helpers import SMALL_RUN, compose_config, record_steps, recorded_steps
from transformer_mt.tasks import run
from transformer_mt.tasks.pipelines.compose import stage_config, training_shape

pytestmark = pytest.mark.slow


def preset(tmp_path, name: str, values: dict) -> list[str]:
    """The overrides that pick an experiment preset `name` setting `values` (a config folder of the
    test's own, on Hydra's search path)."""
    folder = tmp_path / "conf" / "experiment"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text("# @package _global_\n" + OmegaConf.to_yaml(OmegaConf.create(values)))
    return [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", f"experiment={name}"]


def dotted(values: dict, prefix: str = "") -> list[str]:
    """`values` as command-line overrides (key=value, nested keys dotted)."""
    out = []
    for key, value in values.items():
        if isinstance(value, dict):
            out += dotted(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}={value}")
    return out


def without_hydra(cfg) -> dict:
    config = OmegaConf.to_container(cfg, resolve=False)
    config.pop("hydra", None)
    return config


def test_a_fine_tuning_run_is_the_same_from_a_preset_and_from_the_command_line(toy_run, tmp_path):
    """model.init_from and the data in an experiment preset (which picks no optim): optim=auto
    fine-tunes with optim.finetune as it does from the command line, on the same batches to the same
    weights. (Before, a preset counted as picking an optim: noam at 10 x finetune's peak.)"""
    values = {"model": {"init_from": str(toy_run[0])}, "data": {"corpora": {"toy": {"seed": 1, "num_train": 300}}},
              "trainer": {"max_steps": 3}}
    runs = {}
    for name, overrides in (("preset", preset(tmp_path, "finetune_here", values)), ("typed", dotted(values))):
        out = tmp_path / name
        run(compose_config(out, [*overrides, "data.corpora.toy.num_val=5", "data.corpora.toy.num_test=5",
                                 *record_steps(tmp_path / f"{name}.steps")]))
        runs[name] = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert recorded_steps(tmp_path / "preset.steps") == recorded_steps(tmp_path / "typed.steps")
    (a, b) = (runs[name]["hyper_parameters"] for name in ("preset", "typed"))
    assert a["optimizer"] == b["optimizer"] and a["scheduler"] == b["scheduler"]
    assert a["scheduler"]["_target_"].endswith("inverse_sqrt") and a["optimizer"]["lr"] == pytest.approx(0.1 * 0.00442,
                                                                                                      rel=1e-2)
    assert all(torch.equal(v, runs["typed"]["state_dict"][k]) for k, v in runs["preset"]["state_dict"].items())


def test_evaluate_takes_the_same_data_from_a_preset_and_from_the_command_line(small_run, tmp_path):
    """data.split=val set by a preset or typed: the checkpoint's own data (data=checkpoint), its val
    split, either way. (Before, any experiment preset meant the default data=toy's 300 sentences.)"""
    best = f"ckpt_path={small_run[0]}/checkpoints/best.ckpt"
    by_preset = run(compose_config(tmp_path / "preset", ["task=evaluate", best,
                                                          *preset(tmp_path, "val_split", {"data": {"split": "val"}})]))
    typed = run(compose_config(tmp_path / "typed", ["task=evaluate", best, "data.split=val"]))
    assert by_preset["val/bleu"] == typed["val/bleu"] and by_preset["val/loss"] == typed["val/loss"]
    texts = [(tmp_path / name / "val.translations.txt").read_text().splitlines() for name in ("preset", "typed")]
    assert texts[0] == texts[1] and len(texts[0]) == 10  # SMALL_RUN's 10 validation sentences


def test_a_pipeline_stage_is_the_same_from_a_preset_and_from_the_command_line(small_checkpoint, tmp_path):
    """task=distill with the student's settings in a preset or typed: the same stage input (what it
    trains, its fingerprint's part) and the same stage config, the pipeline's own keys left out."""
    values = {"model": {"dropout": 0.2}, "seed": 7, "trainer": {"max_epochs": 2}}
    task = ["task=distill", f"task.teacher={small_checkpoint}", *SMALL_RUN[1:]]
    cache = tmp_path / "cache"
    configs = [compose_config(tmp_path / "a", [*task, *preset(tmp_path, "student", values)], cache),
               compose_config(tmp_path / "b", [*task, *dotted(values)], cache)]
    assert training_shape(configs[0]) == training_shape(configs[1])
    assert training_shape(configs[0])["model"]["dropout"] == 0.2 and training_shape(configs[0])["seed"] == 7
    stages = [without_hydra(stage_config(cfg, str(tmp_path / "student"), {"data.corpora.toy.weight": 0.0}))
              for cfg in configs]
    assert stages[0] == stages[1]
    assert stages[0]["task"]["name"] == "train" and stages[0]["trainer"]["max_epochs"] == 2
    assert stages[0]["data"]["corpora"]["toy"]["weight"] == 0.0 and stages[0]["ckpt_path"] is None
