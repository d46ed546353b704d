"""What a user reads on the console: `--help` offers only config options one can pick; Lightning's log
lines appear once, without its product tips."""

from omegaconf import OmegaConf

from tests.helpers import FAST, compose_config, run_py


def config_groups(help_text: str) -> dict[str, list[str]]:
    """The `group: option, option` lines of `python run.py --help`."""
    section = help_text.split("== Configuration groups ==", 1)[1].split("== Config ==", 1)[0]
    lines = [line for line in section.strip().splitlines()[1:] if ": " in line]
    return {group: options.split(", ") for group, options in (line.split(": ", 1) for line in lines)}


def test_help_offers_only_groups_and_options_that_can_be_picked(tmp_path):
    result = run_py("--help")
    assert result.returncode == 0, result.stderr[-2000:]
    groups = config_groups(result.stdout)
    top = {"callbacks", "data", "debug", "decoding", "experiment", "hparams_search", "logger", "model", "optim",
           "paths", "task", "trainer"}
    # experiment/paper: wmt14_en_de_base is picked as experiment=paper/wmt14_en_de_base; no other nesting
    assert {group.split("/")[0] for group in groups} == top
    assert all(group.startswith("experiment/") for group in groups if "/" in group), sorted(groups)
    for option in groups["callbacks"]:  # each option is a set of callbacks: name -> constructor call
        callbacks = compose_config(tmp_path, [f"callbacks={option}"]).callbacks
        assert all(OmegaConf.is_dict(c) and "_target_" in c for c in callbacks.values()), option
    for option in groups["data"]:
        assert "corpus" in compose_config(tmp_path, [f"data={option}"]).data, option


def test_lightning_log_lines_appear_once_and_without_tips(tmp_path):
    result = run_py(*FAST, f"hydra.run.dir={tmp_path}/run", f"paths.cache_dir={tmp_path}/cache")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert sum("Seed set to 1234" in line for line in lines) == 1, result.stderr[-3000:]
    assert sum("GPU available: " in line for line in lines) == 1
    assert not [line for line in lines if line.startswith("INFO: ")]  # Lightning's own console handler
    assert "Tip:" not in result.stderr and "litlogger" not in result.stderr
    assert "Seed set to 1234" in (tmp_path / "run" / "run.log").read_text()  # kept in the run's log
