"""A command refused on a path or a config check ends before torch and Lightning are imported (issue 69: 7-9 s
before; now about Hydra's composition): each refusal below runs with torch and Lightning made
unimportable and still gives its one line; a command whose paths pass reaches the import. The
refusals run as `python run.py ARGS` processes forked from one that imported Hydra once
(tests/refusal_runs.py); the timed ones are whole processes."""

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.helpers import ROOT

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile

REFUSED = [
    (["task=translate", "ckpt_path={tmp}/missing.ckpt"], "ckpt_path={tmp}/missing.ckpt: no such file"),
    (["task=translate", "ckpt_path={tmp}/text.ckpt"],
     "ckpt_path={tmp}/text.ckpt: not a readable transformer-mt checkpoint (4 bytes that are not a torch checkpoint)"),
    (["task=translate", "ckpt_path={tmp}/ok.ckpt", "task.input={tmp}/missing.txt"], "{tmp}/missing.txt: no such file"),
    (["task=translate", "ckpt_path={tmp}/ok.ckpt", "task.output={tmp}"], "task.output={tmp}: is a directory"),
    (["task=score", "ckpt_path={tmp}/ok.ckpt", "task.source={tmp}/two.txt", "task.target={tmp}/one.txt"],
     "{tmp}/two.txt has 2 lines but {tmp}/one.txt has 1: files must be aligned"),
    (["task=evaluate", "ckpt_path=[{tmp}/ok.ckpt,{tmp}/empty.ckpt]"],
     "ckpt_path={tmp}/empty.ckpt: not a readable transformer-mt checkpoint (the file is empty, 0 bytes)"),
    (["task=distill", "task.teacher={tmp}/missing"], "task.teacher={tmp}/missing: no such checkpoint"),
    (["task=distill", "task.teacher={tmp}", "task.baseline={tmp}"],
     "task.teacher={tmp}: a folder without metrics.json (not a finished training run)"),
    (["task=backtranslate", "task.monolingual={tmp}/missing.txt"], "{tmp}/missing.txt: no such file"),
    (["model.init_from={tmp}/missing"], "model.init_from={tmp}/missing: no such file or folder"),
    (["ckpt_path={tmp}/missing.ckpt"], "ckpt_path={tmp}/missing.ckpt: no such file"),
    (["task=report", "task.sweep_dir={tmp}/missing"], "task.sweep_dir={tmp}/missing: no such directory"),
    (["task=lengths", "task.sweep_dir={tmp}", "task.source={tmp}/two.txt", "task.reference={tmp}/one.txt"],
     "{tmp}/two.txt has 2 lines but {tmp}/one.txt has 1: files must be aligned"),
    (["task=average", "task.run_dir={tmp}/missing", "task.last_n=2"], "task.run_dir={tmp}/missing: no such directory"),
    (["task=serve", "task.models={{a: {tmp}/ok.ckpt, b: {tmp}/missing.ckpt}}"],
     "task.models.b={tmp}/missing.ckpt: no such file"),
    (["task=serve", "ckpt_path={tmp}/text.ckpt"], "ckpt_path={tmp}/text.ckpt: not a readable transformer-mt"),
    (["task=distill"], "task.teacher has no value"),  # config checks: a value the user must give,
    (["task=translate", "ckpt_path={tmp}/ok.ckpt", "task.buffer_size=0"],  # a value against its rule,
     "task.buffer_size=0: must be an integer >= 1 or null"),
    (["+optim.warmup_steps=20"], "+optim.warmup_steps: optim has no key warmup_steps"),  # a + key nothing reads
    (["task=translate", "ckpt_path={tmp}/ok.ckpt", "decoding.shortlist=true"],  # a lexical table not built yet
     "decoding.shortlist=true: {tmp}/ok.ckpt has no lexical table ({tmp}/ok.shortlist.json); build it with "
     "python run.py task=shortlist ckpt_path={tmp}/ok.ckpt"),
    (["decoding.shortlist=true"], "decoding.shortlist=true: task=train does not decode over a vocabulary shortlist"),
    (["task=shortlist", "ckpt_path={tmp}/text.ckpt"], "ckpt_path={tmp}/text.ckpt: not a readable transformer-mt"),
]
# a bad value of each group the schema declares (schema/architecture.py, trainer.py, lightning_module.py,
# search_keys.py, optim.py): refused alike
GROUP_VALUES = [
    (["model.heads=0"], "model.heads=0: must be an integer >= 1"),
    (["model=base", "model.heads=5"], "model.d_model=512 is not divisible by model.heads=5; set model.d_k"),
    (["trainer.max_epochs=abc"], "trainer.max_epochs='abc': must be an integer >= -1"),
    (["trainer.precision=abc"], "trainer.precision='abc': must be 32-true, bf16-mixed, 16-mixed"),
    (["module.label_smoothing=1.0"], "module.label_smoothing=1.0: must be a number in [0, 1)"),
    (["decoding=beam", "decoding.beam_size=0"], "decoding.beam_size=0: must be an integer >= 1"),
    (["optim.optimizer.lr=-1"], "optim.optimizer.lr=-1: must be a number > 0"),
]


@pytest.fixture(scope="module")
def without_torch(tmp_path_factory):
    """An environment in which `import torch` and `import lightning` fail, and the files the cases use."""
    tmp_path = tmp_path_factory.mktemp("refusals")
    for name in ("torch", "lightning"):
        (tmp_path / "blocked" / name).mkdir(parents=True)
        (tmp_path / "blocked" / name / "__init__.py").write_text(f"raise ImportError('{name} was imported')\n")
    torch.save({"state_dict": {}}, tmp_path / "ok.ckpt")
    (tmp_path / "text.ckpt").write_text("text")
    (tmp_path / "empty.ckpt").write_bytes(b"")
    (tmp_path / "two.txt").write_text("a\nb\n")
    (tmp_path / "one.txt").write_text("a\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "blocked"), os.environ.get("PYTHONPATH", "")]),
           "PYTHONWARNINGS": "ignore"}
    return env, tmp_path


CONTROL = ["task=score", "ckpt_path={tmp}/ok.ckpt", "task.source={tmp}/one.txt", "task.target={tmp}/one.txt"]


@pytest.fixture(scope="module")
def refusals(without_torch) -> tuple[dict, Path]:
    """Every case's (exit status, stderr) with torch unimportable, by its arguments, and the files' folder."""
    env, tmp = without_torch
    cases = [*(args for args, _ in REFUSED + GROUP_VALUES), CONTROL]
    argv = [[*(a.format(tmp=tmp) for a in args), f"hydra.run.dir={tmp}/run{n}"] for n, args in enumerate(cases)]
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "refusal_runs.py")], input=json.dumps(argv), env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {tuple(args): tuple(result) for args, result in zip(cases, json.loads(done.stdout), strict=True)}, tmp


def refused(args: list[str], env: dict, tmp) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "run.py"), *(a.format(tmp=tmp) for a in args),
               f"hydra.run.dir={tmp}/run"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def result_of(refusals: tuple[dict, Path], args: list[str]) -> tuple[int, str]:
    return refusals[0][tuple(args)]


@pytest.mark.parametrize(("args", "message"), REFUSED + GROUP_VALUES)
def test_a_path_or_config_refusal_comes_before_torch_is_imported(refusals, args, message):
    status, stderr = result_of(refusals, args)
    assert status == 1 and stderr.strip().splitlines()[-1].startswith(f"error: {message.format(tmp=refusals[1])}")
    assert "was imported" not in stderr


def test_a_bad_value_of_any_group_is_refused_within_seconds(tmp_path):
    """Seven refusals as whole processes, torch importable: each about Hydra's composition (a second
    here), where building anything would take the imports of torch and Lightning first (8.8 s here
    before the groups had a schema). 3 s: three times the composition, well under those imports."""
    times = []
    for args, message in GROUP_VALUES:
        start = time.perf_counter()
        result = refused(args, os.environ, tmp_path)
        times.append(time.perf_counter() - start)
        assert result.returncode == 1 and f"error: {message}" in result.stderr
    assert statistics.median(times) < 3.0, times


def test_a_command_whose_paths_pass_reaches_the_heavy_imports(refusals):
    """The control: the blocked import is what a command that passes its path checks meets next."""
    status, stderr = result_of(refusals, CONTROL)
    assert status != 0 and "ImportError: torch was imported" in stderr
