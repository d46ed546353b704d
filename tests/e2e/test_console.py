"""What a user reads on the console: `--help` is a short usage text (the common commands, the config
groups, Hydra's flags; no config dump) that offers only config options one can pick; Lightning's log
lines appear once, without its product tips."""

import pytest
from omegaconf import OmegaConf

from tests.helpers import FAST, compose_config, run_py
from transformer_mt.errors import ConfigError
from transformer_mt.tasks import run

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile


def config_groups(help_text: str) -> dict[str, list[str]]:
    """The `group: option, option` lines of `python run.py --help`."""
    section = help_text.split("== Config groups (group=option) ==", 1)[1].split("== Hydra's flags ==", 1)[0]
    lines = [line for line in section.strip().splitlines() if ": " in line]
    return {group: options.split(", ") for group, options in (line.split(": ", 1) for line in lines)}


def test_help_offers_only_groups_and_options_that_can_be_picked(tmp_path):
    result = run_py("--help")
    assert result.returncode == 0, result.stderr[-2000:]
    groups = config_groups(result.stdout)
    top = {"callbacks", "data", "debug", "decoding", "experiment", "hparams_search", "logger", "model", "optim",
           "paths", "schedule", "task", "trainer"}
    # experiment/paper: wmt14_en_de_base is picked as experiment=paper/wmt14_en_de_base; no other nesting
    assert {group.split("/")[0] for group in groups} == top
    assert all(group.startswith("experiment/") for group in groups if "/" in group), sorted(groups)
    for option in groups["callbacks"]:  # each option is a set of callbacks: name -> constructor call
        callbacks = compose_config(tmp_path, [f"callbacks={option}"]).callbacks
        assert all(OmegaConf.is_dict(c) and "_target_" in c for c in callbacks.values()), option
    for option in groups["data"]:  # a corpus; data=checkpoint: task=evaluate's, the checkpoint's own data
        data = compose_config(tmp_path, [f"data={option}"]).data
        assert option in (data.get("corpora") or {}) or (option == "checkpoint" and data.from_checkpoint), option
    with pytest.raises(ConfigError, match=r"^data=checkpoint is task=evaluate's data \(a checkpoint's own\); "
                                          r"task=train names its corpus: data=NAME"):
        run(compose_config(tmp_path, ["data=checkpoint"]))


COMMANDS = ["python run.py model=base data=multi30k trainer=gpu",
            "python run.py ckpt_path=outputs/train/<run>/checkpoints/last.ckpt   # resume training",
            "python run.py -m model.heads=1,4,8,16", "python run.py hparams_search=optuna",
            "python run.py task=translate ckpt_path=PATH", "python run.py task=evaluate ckpt_path=PATH",
            "python run.py task=score ckpt_path=PATH task.source=FILE task.target=FILE",
            "python run.py task=average ckpt_path=[a.ckpt,b.ckpt] | task.run_dir=DIR task.last_n=N",
            "python run.py task=export ckpt_path=PATH task.format=hf|ct2", "python run.py task=push task.folder=DIR",
            "python run.py task=report task.sweep_dir=outputs/ablation/heads_<date>",
            "python run.py task=distill task.teacher=RUN_FOLDER",
            "python run.py task=backtranslate task.monolingual=FILE",
            "python run.py task=serve ckpt_path=PATH", "python run.py task=NAME --help"]


def test_help_is_a_short_usage_text_without_the_config():
    """The common commands (as the guides in docs/ and the task schemas write them), the config groups, Hydra's
    flags and where the whole config is: not Hydra's template with a 200-line config dump."""
    result = run_py("--help")
    assert result.returncode == 0, result.stderr[-2000:]
    text = result.stdout
    assert "Usage: python run.py [-m] [task=NAME] [group=option ...] [key=value ...]" in text
    assert [command for command in COMMANDS if command not in text] == []
    groups = config_groups(text)
    assert groups["task"] == ["average", "backtranslate", "distill", "evaluate", "export", "lengths", "push",
                              "report", "score", "serve", "shortlist", "train", "translate"]
    assert groups["decoding"] == ["beam", "greedy", "sample"]
    assert "--multirun,-m : Run multiple jobs" in text and "--cfg,-c : Show config" in text  # Hydra's flags
    assert "python run.py [key=value ...] --cfg job" in text and "python run.py --hydra-help" in text
    lines = text.splitlines()
    assert len(lines) < 100 and not [line for line in lines if "_target_:" in line], len(lines)
    assert "is powered by Hydra" not in text and "== Config ==" not in text and "seed: 1234" not in text


def test_lightning_log_lines_appear_once_and_without_tips(tmp_path):
    result = run_py(*FAST, f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={tmp_path}/cache")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert sum("Seed set to 1234" in line for line in lines) == 1, result.stderr[-3000:]
    assert sum("GPU available: " in line for line in lines) == 1
    assert not [line for line in lines if line.startswith("INFO: ")]  # Lightning's own console handler
    assert "Tip:" not in result.stderr and "litlogger" not in result.stderr
    for unactionable in ("TPU available", "Trainer already configured with model summary", "will override existing"):
        assert unactionable not in result.stderr, unactionable
    assert "is deprecated" not in result.stderr  # torch's, inside Lightning: nothing a user can do about it
    assert "Seed set to 1234" in (tmp_path / "run" / "run.log").read_text()  # kept in the run's log
