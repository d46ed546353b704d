"""Where task.engine=ctranslate2 keeps the converted model (inference/ct2_engine.py: ct2_root), as a
user sees it through `python run.py`: ct2/ beside the checkpoint where its folder can be written and
lies outside any git work tree; else the user cache's ct2/ ($TRANSFORMER_MT_CACHE/ct2), with a log
line saying why; task.ct2_dir=DIR where given, one `error: task.ct2_dir=...` line where DIR cannot
be written. The checkpoint's folder is never written in the first two cases, and the checkpoint's
lexical table becomes vmap.txt in whichever folder is used.

A read-only folder, as the test runs as root: file modes do not bind root, so its run.py runs with
CAP_DAC_OVERRIDE dropped (a folder of mode 555 then refuses it as it refuses a user); the test
checks first that the folder truly refuses that process."""

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, assert_clean_failure, compose_config, run_py, toy_checkpoint_copy
from transformer_mt.errors import ConfigError
from transformer_mt.tasks import run
from transformer_mt.tasks.pipelines.stage_work import engine_input

# where a conversion goes, its messages and files (two decodes compared on one machine): not run again
# under the portable profile
pytestmark = [pytest.mark.slow, pytest.mark.cli]
pytest.importorskip("ctranslate2")

PR_CAPBSET_DROP, CAP_DAC_OVERRIDE = 24, 1  # linux/prctl.h, linux/capability.h


@pytest.fixture
def checkpoint(toy_run, tmp_path, monkeypatch):
    """The default job's best.ckpt copied into tmp_path/model, 300 test sources in tmp_path/in.txt,
    and the user cache at tmp_path/cache (run.py's processes inherit it)."""
    monkeypatch.setenv("TRANSFORMER_MT_CACHE", str(tmp_path / "cache"))
    return toy_checkpoint_copy(toy_run[0], tmp_path)


def translate(tmp_path: Path, checkpoint: Path, name: str, *overrides: str) -> subprocess.CompletedProcess:
    """`python run.py task=translate task.engine=ctranslate2` of tmp_path/in.txt into tmp_path/NAME.txt."""
    return run_py("task=translate", f"ckpt_path={checkpoint}", f"task.input={tmp_path}/in.txt",
                  f"task.output={tmp_path}/{name}.txt", "task.engine=ctranslate2", f"hydra.run.dir={tmp_path}/{name}",
                  *overrides)


def conversions(folder: Path) -> list[str]:
    """The converted models in `folder` (each a folder with a model.bin)."""
    return sorted(p.name for p in folder.iterdir() if (p / "model.bin").is_file()) if folder.is_dir() else []


def as_a_user() -> None:
    """In the child process before it runs: as root, CAP_DAC_OVERRIDE dropped (file modes bind it)."""
    if os.geteuid() == 0 and ctypes.CDLL(None, use_errno=True).prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE)")


def run_as_a_user(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`python ARGS` as a process that file modes bind (as_a_user), its output as text."""
    return subprocess.run([sys.executable, *args], cwd=ROOT, env={**os.environ, "PYTHONWARNINGS": "ignore", **env},
                          capture_output=True, text=True, timeout=600, preexec_fn=as_a_user)


def read_only(folder: Path) -> None:
    """`folder` made read-only (mode 555); skips the test where that does not stop as_a_user's writes."""
    folder.chmod(0o555)
    probe = run_as_a_user("-c", f"open({str(folder / 'probe')!r}, 'w')", env={})
    if probe.returncode == 0:
        (folder / "probe").unlink()
        pytest.skip("a folder of mode 555 does not refuse this process's writes")
    assert "PermissionError" in probe.stderr, probe.stderr


def test_a_checkpoint_in_a_read_only_folder_converts_into_the_user_cache(checkpoint, tmp_path):
    writable = tmp_path / "writable" / "best.ckpt"
    writable.parent.mkdir()
    shutil.copy(checkpoint, writable)
    beside = translate(tmp_path, writable, "beside")
    assert beside.returncode == 0, beside.stderr[-3000:]
    assert len(conversions(writable.parent / "ct2")) == 1
    read_only(checkpoint.parent)
    try:
        cache, home = tmp_path / "cache", tmp_path / "home"
        result = run_as_a_user(str(ROOT / "run.py"), "task=translate", f"ckpt_path={checkpoint}",
                               f"task.input={tmp_path}/in.txt", f"task.output={tmp_path}/read_only.txt",
                               "task.engine=ctranslate2", f"hydra.run.dir={tmp_path}/read_only",
                               env={"TRANSFORMER_MT_CACHE": str(cache), "HOME": str(home)})
    finally:
        checkpoint.parent.chmod(0o755)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert (tmp_path / "read_only.txt").read_text() == (tmp_path / "beside.txt").read_text()
    assert len((tmp_path / "read_only.txt").read_text().splitlines()) == 300
    assert [p.name for p in checkpoint.parent.iterdir()] == ["best.ckpt"]  # nothing written beside it
    assert conversions(cache / "ct2") == conversions(writable.parent / "ct2")  # the same name: digest, weights
    assert (f"the checkpoint's folder {checkpoint.parent} cannot be written (Permission denied): the conversion "
            f"goes into the user cache {cache / 'ct2'}") in result.stderr
    assert f"converted into {cache / 'ct2'}" in result.stderr


def test_a_checkpoint_inside_a_git_work_tree_converts_into_the_user_cache(checkpoint, tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "models").mkdir()
    shipped = repo / "models" / "best.ckpt"
    shutil.move(checkpoint, shipped)
    first, again = translate(tmp_path, shipped, "first"), translate(tmp_path, shipped, "again")
    assert first.returncode == 0 and again.returncode == 0, (first.stderr + again.stderr)[-3000:]
    assert [p.name for p in shipped.parent.iterdir()] == ["best.ckpt"]
    cache = tmp_path / "cache" / "ct2"
    assert len(conversions(cache)) == 1 and conversions(cache)[0].startswith("best-")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, check=True,
                            capture_output=True, text=True).stdout
    assert status.splitlines() == ["?? models/best.ckpt"]
    assert f"the checkpoint's folder {shipped.parent} lies inside a git work tree" in first.stderr
    assert "converted into" in first.stderr and f"{cache / conversions(cache)[0]}, converted before" in again.stderr
    assert len((tmp_path / "again.txt").read_text().splitlines()) == 300


def test_task_ct2_dir_holds_the_conversion_and_its_vocabulary_map(checkpoint, tmp_path):
    run(compose_config(tmp_path / "build", ["task=shortlist", f"ckpt_path={checkpoint}", "task.candidates=1",
                                            "task.frequent=2"]))
    table = checkpoint.with_name("best.shortlist.json")
    ours = run_py("task=translate", f"ckpt_path={checkpoint}", f"task.input={tmp_path}/in.txt",
                  f"task.output={tmp_path}/ours.txt", "decoding.shortlist=true", "task.max_tokens=100000",
                  f"hydra.run.dir={tmp_path}/ours")
    mine = tmp_path / "mine" / "conversions"
    result = translate(tmp_path, checkpoint, "mine", f"task.ct2_dir={mine}", "decoding.shortlist=true",
                       "task.max_tokens=100000")
    assert ours.returncode == 0 and result.returncode == 0, (ours.stderr + result.stderr)[-3000:]
    assert sorted(p.name for p in checkpoint.parent.iterdir()) == ["best.ckpt", table.name]
    assert not (tmp_path / "cache" / "ct2").exists()
    [name] = conversions(mine)
    assert (mine / name / "vmap.txt").is_file() and f"converted into {mine / name}" in result.stderr
    assert (tmp_path / "mine.txt").read_text() == (tmp_path / "ours.txt").read_text()  # decoded over the table


def test_a_task_ct2_dir_that_cannot_be_written_is_one_line(checkpoint, tmp_path):
    (tmp_path / "a_file").write_text("")
    under_a_file = translate(tmp_path, checkpoint, "under_a_file", f"task.ct2_dir={tmp_path}/a_file/ct2")
    assert_clean_failure(under_a_file, f"error: task.ct2_dir={tmp_path}/a_file/ct2: cannot write the converted "
                                       "model there (Not a directory)")
    locked = tmp_path / "locked"
    locked.mkdir()
    read_only(locked)
    try:
        refused = run_as_a_user(str(ROOT / "run.py"), "task=translate", f"ckpt_path={checkpoint}",
                                f"task.input={tmp_path}/in.txt", f"task.output={tmp_path}/locked.txt",
                                "task.engine=ctranslate2", f"task.ct2_dir={locked}",
                                f"hydra.run.dir={tmp_path}/locked_run", env={})
    finally:
        locked.chmod(0o755)
    assert_clean_failure(refused, f"error: task.ct2_dir={locked}: cannot write the converted model there "
                                  "(Permission denied)")
    assert list(locked.iterdir()) == [] and [p.name for p in checkpoint.parent.iterdir()] == ["best.ckpt"]
    assert not (tmp_path / "cache" / "ct2").exists() and not (tmp_path / "locked.txt").exists()


def test_task_ct2_dir_is_no_input_of_a_pipelines_synthetic_stage(tmp_path):
    """The synthetic stage's inputs (its fingerprint) name the engine, not where its conversion lies;
    an unwritable task.ct2_dir is refused as the stage's inputs are taken, before any work."""
    def inputs(*overrides: str) -> dict:
        return engine_input(compose_config(tmp_path / "run", ["task=distill", "task.engine=ctranslate2", *overrides]),
                            [])

    assert inputs() == inputs(f"task.ct2_dir={tmp_path}/elsewhere") == {"engine": "ctranslate2"}
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ConfigError, match=rf"^task.ct2_dir={tmp_path}/a_file/ct2: cannot write the converted model "
                                          r"there \(Not a directory\)$"):
        inputs(f"task.ct2_dir={tmp_path}/a_file/ct2")
