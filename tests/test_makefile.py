"""The Makefile's clean targets: `clean` removes caches only, runs go only with `clean-outputs`."""

import shutil
import subprocess

import pytest

from tests.helpers import ROOT

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
