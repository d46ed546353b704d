"""The rule for where options live (README, "Configuration"): a task's own options are under
`task.`, in its schema class (transformer_mt.schema); the top level holds only what every task
shares; each renamed key is refused with one line naming its new key."""

from inspect import getsource

import pytest
from omegaconf import OmegaConf

from tests.helpers import assert_clean_failure, compose_config, run_py
from transformer_mt.errors import ConfigError
from transformer_mt.renamed import RENAMED, refuse_old_keys
from transformer_mt.tasks.options import TASKS


def test_every_task_keeps_its_options_under_task_and_adds_nothing_at_the_top(tmp_path):
    shared = set(compose_config(tmp_path, ["task=train"]))
    assert len(TASKS) == 13
    for name in TASKS:
        cfg = compose_config(tmp_path, [f"task={name}"])
        assert set(cfg) == shared, (name, set(cfg) ^ shared)  # its keys land under task., nowhere else
        runner = OmegaConf.get_type(cfg, "task").runner  # its module's run function, imported when it runs
        assert cfg.task.name == name and f"from transformer_mt.tasks.{name} import run" in getsource(runner)
        assert not {f"task.{key}" for key in cfg.task} & set(RENAMED)  # no renamed key


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_an_old_spelling_on_the_command_line_is_one_line_naming_the_new_key(old):
    new = RENAMED[old].split()[0]
    for override in (f"{old}=x", f"+{old}=x", f"++{old}=x", f"~{old}", f"{old}.inner=x"):
        with pytest.raises(ConfigError, match=f"^{old}= was renamed: it is now {new}"):
            refuse_old_keys(["task=translate", override])
    refuse_old_keys(["task=translate", f"task.{old.removeprefix('task.')}_other=x", "-m", "--cfg", "job"])


def test_an_old_spelling_in_a_preset_is_refused_by_composition_naming_the_preset_and_key(tmp_path):
    """A preset written before a rename (here `last_n: 5` at the top, `task.average_last_n`): the
    schema declares no such key, so Hydra refuses the preset as it composes, naming the preset and
    the key, exit status 1, no traceback, and no run directory."""
    presets = tmp_path / "presets" / "experiment"
    presets.mkdir(parents=True)
    (presets / "old_top.yaml").write_text("# @package _global_\nlast_n: 5\n")
    (presets / "old_task.yaml").write_text("# @package _global_\ntask:\n  average_last_n: 5\n")
    for preset, key, schema in (("old_top", "last_n", "RunConfig"), ("old_task", "average_last_n", "TrainTask")):
        result = run_py(f"experiment={preset}", f"hydra.searchpath=[file://{tmp_path}/presets]",
                        f"hydra.run.dir={tmp_path}/run")
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert f"In 'experiment/{preset}'" in result.stderr and f"Key '{key}' not in '{schema}'" in result.stderr
        assert not (tmp_path / "run").exists()


def test_run_py_refuses_an_old_spelling_before_hydra(tmp_path):
    result = run_py("task=translate", "ckpt_path=x.ckpt", f"input={tmp_path}/in.txt", f"hydra.run.dir={tmp_path}/r")
    assert_clean_failure(result, "input= was renamed: it is now task.input")
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
