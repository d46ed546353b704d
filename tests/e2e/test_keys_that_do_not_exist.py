"""Keys that do not exist (issue 69), as a user types them on run.py's command line: a misspelt key,
a key added with `+` where nothing reads it, a group option that is not one, a corpus node's
argument its class does not take. Each is one line naming the full key and the nearest real one,
exit status 1, before any work; a `+` key a constructor or an open node takes still works."""

import pytest

from tests.helpers import run_py

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile

CASES = [
    (["optim.warmup_steps=20"], "error: optim.warmup_steps: no such key (did you mean optim.scheduler.warmup_steps?)"),
    (["model.hedas=4"], "error: model.hedas: no such key (did you mean model.heads?)"),
    (["+optim.warmup_steps=20"], "error: +optim.warmup_steps: optim has no key warmup_steps and nothing would read "
                                 "it (did you mean optim.scheduler.warmup_steps?)"),
    (["+trainer.benchmark=true"], "error: +trainer.benchmark: the key exists; set it without the + "
                                  "(trainer.benchmark=VALUE)"),
    (["model=huge"], "error: model=huge: no such option of model; its options: base, big, small, student_cpu, tiny"),
    (["+data.corpora.copy={_target_: transformer_mt.data.ToyCorpus, mode: copy, wieght: 0.5}"],
     "error: data.corpora.copy.wieght: ToyCorpus takes no argument wieght (did you mean data.corpora.copy.weight?); "
     "it takes mode, num_train, num_val, num_test, seed, weight, tag, target_tag"),
]


@pytest.mark.parametrize("overrides, line", CASES, ids=["misspelt", "misspelt-model", "plus", "plus-existing", "option",
                                                               "argument"])
def test_a_key_that_does_not_exist_is_one_line_naming_the_nearest(tmp_path, overrides, line):
    result = run_py(*overrides, f"hydra.run.dir={tmp_path}/run")
    assert result.returncode == 1 and result.stderr.strip().splitlines()[-1] == line, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "HYDRA_FULL_ERROR" not in result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


SHIPPED = "ckpt_path=experiments/multi30k/multi30k_en_de.ckpt"
OTHER_DECODING = [
    ([], "decoding.constraints=true", "error: decoding.constraints is a key of decoding=beam, not of decoding=greedy: "
                                      "add decoding=beam"),
    (["decoding=greedy"], "decoding.beam_size=5",
     "error: decoding.beam_size is a key of decoding=beam, not of decoding=greedy: add decoding=beam"),
    (["decoding=beam"], "decoding.temperature=0.7",
     "error: decoding.temperature is a key of decoding=sample, not of decoding=beam: add decoding=sample"),
    ([], "decoding.nbest=2", "error: decoding.nbest is a key of decoding=beam and decoding=sample, not of "
                             "decoding=greedy: add decoding=beam or decoding=sample"),
    (["decoding=beam"], "decoding.beam_sise=5", "error: decoding.beam_sise: no such key (did you mean "
                                                "decoding.beam_size?)"),
]


@pytest.mark.parametrize("choice, override, line", OTHER_DECODING,
                         ids=["greedy-constraints", "greedy-beam_size", "beam-temperature", "greedy-nbest", "typo"])
def test_a_key_of_another_decoding_names_the_decoding_that_has_it(tmp_path, choice, override, line):
    """A key of one decoding option set (conf/decoding/*.yaml) given with another is one line naming the
    set that has it and the choice to add; a misspelt key still names the nearest real one."""
    result = run_py("task=translate", SHIPPED, *choice, override, f"hydra.run.dir={tmp_path}/run")
    assert result.returncode == 1 and result.stderr.strip().splitlines()[-1] == line, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_key_of_another_validation_decoding_names_its_choice(tmp_path):
    result = run_py("val_decoding.beam_size=3", f"hydra.run.dir={tmp_path}/run")
    assert result.returncode == 1 and result.stderr.strip().splitlines()[-1] == (
        "error: val_decoding.beam_size is a key of decoding@val_decoding=beam, and decoding@val_decoding is not "
        "chosen: add decoding@val_decoding=beam"), result.stderr[-2000:]


def test_plus_keys_that_a_constructor_or_an_open_node_takes_still_run(tmp_path):
    result = run_py("++trainer.max_steps=2", "+optim.optimizer.amsgrad=true", "++module.num_samples=1",
                    "trainer.max_epochs=1", "data.corpora.toy.num_train=60", "data.corpora.toy.num_val=4",
                    "data.corpora.toy.num_test=4",
                    "+callbacks.extra_bar._target_=lightning.pytorch.callbacks.LearningRateMonitor",
                    f"hydra.run.dir={tmp_path}/run")
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize("task", ["distill", "backtranslate", "translate", "train"])
def test_task_help_prints_that_tasks_command_and_keys_at_once(task):
    """`task=NAME --help`: its command (the schema's docstring) and every key of its own with its
    default and description, in well under a second (no Hydra composition, no torch)."""
    import subprocess
    import sys
    import time

    from tests.helpers import ROOT
    from transformer_mt.schema.keys import described
    from transformer_mt.tasks.options import TASKS

    start = time.monotonic()
    result = subprocess.run([sys.executable, str(ROOT / "run.py"), f"task={task}", "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and time.monotonic() - start < 3, result.stderr
    assert result.stdout.startswith(f"python run.py task={task}" if task != "train" else "python run.py [")
    keys = [each.name for each in described(TASKS[task]) if each.name != "name"]
    assert keys and all(f"\ntask.{key} = " in result.stdout for key in keys)
    unknown = subprocess.run([sys.executable, str(ROOT / "run.py"), "task=distil", "--help"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 1 and unknown.stderr.strip() == (
        "error: task=distil: no such task; the tasks: train, evaluate, translate, score, average, export, push, "
        "report, lengths, distill, backtranslate, serve, shortlist")


@pytest.mark.parametrize(("group", "name", "keys"), [
    ("decoding", "beam", ["beam_size = 4", "nbest = 1", "options.max_len_b = 50", "options.check_every = null"]),
    ("decoding", "greedy", ["shortlist = false", "options.max_len_a = 1.2"]),
    ("optim", "noam", ["optimizer.lr = 1.0", "scheduler.warmup_steps = 4000"]),
    ("optim", "auto", ["optimizer.lr = 1.0", "finetune.optimizer.lr = null", "finetune.peak_fraction = 0.1"]),
])
def test_an_options_help_lists_its_keys_from_the_schema(group, name, keys):
    """`decoding=NAME --help`, `optim=NAME --help`: the option's use and every key of its node with its
    default (a nested node's keys too), from the schema, without Hydra or torch."""
    import subprocess
    import sys

    from tests.helpers import ROOT

    result = subprocess.run([sys.executable, str(ROOT / "run.py"), f"{group}={name}", "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith(f"{group}={name}: "), result.stderr
    assert all(f"\n{group}.{key}\n" in result.stdout for key in keys), result.stdout
