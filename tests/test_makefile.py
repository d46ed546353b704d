"""The Makefile's clean targets: `clean` removes caches only, runs go only with `clean-outputs`;
`test-portable` computes as another CPU would."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import PROFILE_VARIABLES, ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def make(tmp_path, *targets: str) -> None:
    result = subprocess.run(["make", "-f", "Makefile", *targets, f"VENV={tmp_path}/.venv"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def project(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for path in ("outputs/train/2024-01-01_00-00-00/metrics.json", "outputs/run1/metrics.json", "outputs/.gitkeep",
                 ".cache/vocab-x/src.json", ".pytest_cache/v", ".ruff_cache/x", "src/pkg/__pycache__/m.pyc",
                 "__pycache__/a.pyc", ".venv/lib/site/__pycache__/b.pyc", "src/pkg/m.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    return tmp_path


def test_clean_removes_caches_and_keeps_runs_and_the_venv(project):
    make(project, "clean")
    assert (project / "outputs/run1/metrics.json").is_file()
    assert (project / "outputs/train/2024-01-01_00-00-00/metrics.json").is_file()
    for cache in (".cache", ".pytest_cache", ".ruff_cache", "src/pkg/__pycache__", "__pycache__"):
        assert not (project / cache).exists(), cache
    assert (project / "src/pkg/m.py").is_file()
    assert (project / ".venv/lib/site/__pycache__/b.pyc").is_file()


def test_clean_outputs_removes_the_runs_and_keeps_gitkeep(project):
    make(project, "clean-outputs")
    assert sorted(p.name for p in (project / "outputs").iterdir()) == [".gitkeep"]
    assert (project / ".cache/vocab-x/src.json").is_file()


def test_clean_venv_removes_only_the_venv(project):
    make(project, "clean-venv")
    assert not (project / ".venv").exists()
    assert (project / "outputs/run1/metrics.json").is_file() and (project / ".cache").is_dir()


def capability(env: dict[str, str]) -> str:
    """What torch computes with in a process with environment `env`."""
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=True).stdout.strip()


def test_the_portable_pass_computes_otherwise_than_this_cpu():
    """make test-portable's profile is one step below this CPU's own code path (avx2 under AVX-512,
    default else), and torch computes with it there: the second pass of .ci/run never repeats the
    first. (Its variables are taken out first: under make test-portable this test runs in it.)"""
    own = {k: v for k, v in os.environ.items() if k not in PROFILE_VARIABLES}
    result = subprocess.run(["make", "-n", "test-portable", f"VENV={sys.prefix}"], cwd=ROOT, env=own,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("env "))
    profile = dict(word.split("=", 1) for word in line.split()[1:] if word.split("=")[0] in PROFILE_VARIABLES)
    assert profile.keys() == set(PROFILE_VARIABLES)
    native = capability(own)
    assert profile["ATEN_CPU_CAPABILITY"] == ("avx2" if native == "AVX512" else "default")
    assert capability({**own, **profile}) == profile["ATEN_CPU_CAPABILITY"].upper() != native
