"""The rule for where options live (README, "Configuration"): a task's own options are under
`task.`, in its conf/task/<name>.yaml; the top level holds only what every task shares; each
renamed key is refused with one line naming its new key."""

import pytest
from omegaconf import open_dict

from tests.helpers import ROOT, assert_clean_failure, compose_config, run_py
from transformer_mt.errors import ConfigError
from transformer_mt.renamed import RENAMED, refuse_old_config_keys, refuse_old_keys
from transformer_mt.tasks import run

TASKS = sorted(p.stem for p in (ROOT / "conf" / "task").glob("*.yaml"))


def test_every_task_keeps_its_options_under_task_and_adds_nothing_at_the_top(tmp_path):
    shared = set(compose_config(tmp_path, ["task=train"]))
    assert len(TASKS) == 10
    for name in TASKS:
        text = (ROOT / "conf" / "task" / f"{name}.yaml").read_text()
        assert "@package" not in text, name  # its keys land under task., nowhere else
        cfg = compose_config(tmp_path, [f"task={name}"])
        assert set(cfg) == shared, (name, set(cfg) ^ shared)
        assert cfg.task.name == name and cfg.task.run == f"transformer_mt.tasks.{name}.run"
        refuse_old_config_keys(cfg)  # no task file still sets a renamed key


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_an_old_spelling_on_the_command_line_is_one_line_naming_the_new_key(old):
    new = RENAMED[old].split()[0]
    for override in (f"{old}=x", f"+{old}=x", f"++{old}=x", f"~{old}", f"{old}.inner=x"):
        with pytest.raises(ConfigError, match=f"^{old}= was renamed: it is now {new}"):
            refuse_old_keys(["task=translate", override])
    refuse_old_keys(["task=translate", f"task.{old.removeprefix('task.')}_other=x", "-m", "--cfg", "job"])


def test_an_old_spelling_in_a_config_file_is_refused_before_the_task_runs(tmp_path):
    cfg = compose_config(tmp_path, ["task=average"])
    with open_dict(cfg):
        cfg.last_n = 5  # as an experiment preset written before the rename would set it
    with pytest.raises(ConfigError, match="last_n= was renamed: it is now task.last_n"):
        run(cfg)
    assert not (tmp_path / "average.ckpt").exists()
    cfg = compose_config(tmp_path, ["task=train"])
    with open_dict(cfg):
        cfg.task.average_last_n = 5
    with pytest.raises(ConfigError, match="task.average_last_n= was renamed: it is now task.last_n"):
        run(cfg)


def test_run_py_refuses_an_old_spelling_before_hydra(tmp_path):
    result = run_py("task=translate", "ckpt_path=x.ckpt", f"input={tmp_path}/in.txt", f"hydra.run.dir={tmp_path}/r")
    assert_clean_failure(result, "input= was renamed: it is now task.input")
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
