"""experiments/benchmarks/batches.py --what grid, run as a process: today's batcher against data.shape_grid,
counted by hand on a tiny corpus (--lengths), and the script's table of the WMT-like corpus with the
grids it is given."""

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT


@pytest.fixture(scope="module")
def grids(tmp_path_factory) -> tuple[dict, str]:
    """The script's JSON and stdout: a given corpus in batches of 20 tokens and 5,000 WMT-like pairs,
    grids of 2, 4 and 8."""
    folder = tmp_path_factory.mktemp("grid")
    src = [3, 3, 4, 4, 5, 5, 9, 9, 10]
    (folder / "lengths.txt").write_text("".join(f"{s} {s - 1}\n" for s in src))  # each pair's size is its source's
    result = subprocess.run([sys.executable, "experiments/benchmarks/batches.py", "--what", "grid", "--pairs", "5000",
                             "--grids", "2", "4", "8", "--lengths", str(folder / "lengths.txt"), "--budget", "20",
                             "--json", str(folder / "grid.json")], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads((folder / "grid.json").read_text()), result.stdout


def test_positions_padding_and_shapes_are_counted_as_the_batches_are_padded(grids):
    today, grid = grids[0]["given"][:2]
    # today: sorted sizes cut greedily under 20 padded tokens: [3 3 4 4 | 5 5 | 9 9 | 10]
    assert (today["grid"], grid["grid"]) == (None, 2)
    assert (today["positions"], today["batches"], today["shapes"]) == (16 + 10 + 18 + 10, 4, 4)
    assert today["tensor_positions"] == 4 * (4 + 3) + 2 * (5 + 4) + 2 * (9 + 8) + 1 * (10 + 9)
    assert today["padding"] == 1 - 52 / 54
    # the grid: lengths 5 (4 rows) and 10 (2 rows), 80 positions (one length, 10, would take 100):
    # [six of 3 to 5 in two batches] and [9 9 | 10 + a filling row]
    assert (grid["positions"], grid["batches"], grid["shapes"]) == (2 * 20 + 2 * 20, 4, 2)
    assert grid["tensor_positions"] == 2 * grid["positions"] and grid["padding"] == 1 - 52 / 80


def test_the_script_prints_both_corpora_with_the_grids_it_is_given(grids):
    rows = grids[0]["WMT-like"]
    assert [r["grid"] for r in rows] == [None, 2, 4, 8]
    assert rows[2]["shapes"] <= 4 and rows[3]["shapes"] <= 8 and all(r["positions"] >= rows[0]["positions"]
                                                                   for r in rows)
    assert "| WMT-like | shape_grid=8 |" in grids[1] and "| given | shape_grid=2 |" in grids[1]
