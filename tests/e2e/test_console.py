"""What a user reads on the console: `--help` offers only config options one can pick."""

from omegaconf import OmegaConf

from tests.helpers import compose_config, run_py


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
