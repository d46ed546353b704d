"""A training run takes its run folder for itself: a second run into it is refused while the first
runs and after it finished; a resume into its own folder works; DDP ranks share their run's folder."""

import os
import subprocess
import time

import pytest

from tests.helpers import ROOT, assert_clean_failure, python, run_py
from transformer_mt.run_folder import launching_process

pytestmark = pytest.mark.cli  # messages, statuses and files: not run again under the portable profile

TOY = ["data.corpora.toy.num_train=600", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20"]


@pytest.mark.parametrize("environ, first", [
    ({}, True),
    ({"LOCAL_RANK": "0", "NODE_RANK": "0"}, True),
    ({"LOCAL_RANK": "1"}, False),  # a DDP rank Lightning started
    ({"NODE_RANK": "1"}, False),  # the first process of another node
    ({"SLURM_PROCID": "3"}, False),
])
def test_only_the_launching_process_claims_the_folder(environ, first):
    assert launching_process(environ) is first


@pytest.mark.slow
def test_a_second_run_into_a_folder_in_use_or_finished_is_refused_and_a_resume_works(tmp_path):
    folder, cache = tmp_path / "one-folder", f"paths.cache_dir={tmp_path}/cache"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    first = subprocess.Popen([python(env), str(ROOT / "run.py"), *TOY, "trainer.max_epochs=3", cache,
                              f"hydra.run.dir={folder}"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        lock = folder / "run.lock"
        deadline = time.monotonic() + 120
        while not (lock.is_file() and lock.read_text()) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        second = run_py(*TOY, "trainer.max_epochs=3", "seed=5", cache, f"hydra.run.dir={folder}")
        assert first.poll() is None, "the first run ended before the second one started: make it longer"
        pid = int(lock.read_text().split()[1])  # the first run's process (forked by `first`, when warm)
        os.kill(pid, 0)  # alive
    finally:
        out, err = first.communicate(timeout=600)
    assert_clean_failure(second, f"error: {folder} is the run folder of another training run, still running "
                                 f"(pid {pid} on ")
    assert "give this run another folder (hydra.run.dir=...)" in second.stderr
    assert first.returncode == 0, err[-3000:]
    assert "seed: 1234" in (folder / "config.yaml").read_text()  # the second run wrote nothing
    assert "seed=5" not in (folder / ".hydra" / "overrides.yaml").read_text()
    assert not lock.exists()  # removed when the run ended

    last = folder / "checkpoints" / "last.ckpt"
    again = run_py(*TOY, "trainer.max_epochs=3", "seed=5", cache, f"hydra.run.dir={folder}")
    assert_clean_failure(again, f"error: {folder} holds the checkpoints of an earlier training run: resume it with "
                                f"ckpt_path={last} (or ckpt_path=last), or give this run another folder "
                                "(hydra.run.dir=...)")
    assert "seed=5" not in (folder / ".hydra" / "overrides.yaml").read_text()

    resumed = run_py(*TOY, "trainer.max_epochs=4", cache, f"hydra.run.dir={folder}", f"ckpt_path={last}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Previous log files" not in resumed.stderr  # Lightning's claim: the earlier curves are kept
    assert (folder / "csv" / "metrics.part1.csv").is_file()
    assert '"epochs": 4' in (folder / "metrics.json").read_text()
    assert not lock.exists()


SHIPPED = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"


def test_two_translations_started_together_get_a_folder_each_with_its_own_config(tmp_path):
    """Default run folders end with the launching process's id: two runs started in the same second
    never share one (each folder's config and overrides name its own output)."""
    (tmp_path / "in.txt").write_text("a man rides a bike .\n")
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PROJECT_ROOT": str(tmp_path)}
    runs = [subprocess.Popen([python(env), str(ROOT / "run.py"), "task=translate", f"ckpt_path={SHIPPED}",
                              f"task.input={tmp_path}/in.txt", f"task.output={tmp_path}/out{i}.txt"], cwd=ROOT, env=env,
                             stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    for process in runs:
        assert process.wait(timeout=300) == 0, process.stderr.read()[-3000:]
    folders = sorted((tmp_path / "outputs" / "translate").iterdir())
    pids = {f.name.rsplit("_", 1)[1] for f in folders}  # the runs' processes (forked by `runs`, when warm)
    assert len(folders) == len(pids) == 2 and all(pid.isdigit() for pid in pids)
    for i in (1, 2):
        override = f"task.output={tmp_path}/out{i}.txt"
        folder = next(f for f in folders if override in (f / ".hydra/overrides.yaml").read_text())
        assert f"output: {tmp_path}/out{i}.txt" in (folder / "config.yaml").read_text()
        assert (tmp_path / f"out{i}.txt").read_text().count("\n") == 1


@pytest.fixture
def read_only(tmp_path):
    """A folder nothing can be written into: by its mode, or as root (whom modes do not bind) by
    `chattr +i` or a read-only bind mount; skipped where neither is available."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
    elif subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0:
        yield folder
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    elif subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True).returncode == 0:
        yield folder
        subprocess.run(["umount", str(folder)], check=True)
    else:
        pytest.skip("no way to make a folder read-only for root here (chattr, mount)")


@pytest.mark.parametrize("where, key", [("inside", "hydra.run.dir"), ("itself", "hydra.run.dir"),
                                        ("sweep", "hydra.sweep.dir")])
def test_a_run_folder_that_cannot_be_written_is_one_line_before_any_work(read_only, tmp_path, where, key):
    folder = read_only if where == "itself" else read_only / "run"
    (tmp_path / "in.txt").write_text("a man rides a bike .\n")
    result = run_py(*(["-m"] if where == "sweep" else []), "task=translate", f"ckpt_path={SHIPPED}",
                    f"task.input={tmp_path}/in.txt", f"{key}={folder}")
    assert_clean_failure(result, f"error: cannot write the run folder {folder}: ")
    assert result.stderr.strip().endswith(f"(give the run another one: {key}=...)")
    assert not any(read_only.iterdir())
