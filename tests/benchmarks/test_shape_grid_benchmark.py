"""experiments/benchmarks/shape_grid.py: today's batcher against data.shape_grid, counted by hand
on a tiny corpus, and the script's table from its command line."""

import json
import subprocess
import sys

import numpy as np

from tests.helpers import ROOT, load_script

grid_script = load_script("experiments/benchmarks/shape_grid.py")


def test_positions_padding_and_shapes_are_counted_as_the_batches_are_padded():
    src = np.array([3, 3, 4, 4, 5, 5, 9, 9, 10])
    tgt = src - 1  # each pair's size is its source's
    today = grid_script.measured(src, tgt, 20, None)
    grid = grid_script.measured(src, tgt, 20, 2)
    # today: sorted sizes cut greedily under 20 padded tokens: [3 3 4 4 | 5 5 | 9 9 | 10]
    assert (today["positions"], today["batches"], today["shapes"]) == (16 + 10 + 18 + 10, 4, 4)
    assert today["tensor_positions"] == 4 * (4 + 3) + 2 * (5 + 4) + 2 * (9 + 8) + 1 * (10 + 9)
    assert today["padding"] == 1 - 52 / 54
    # the grid: lengths 5 (4 rows) and 10 (2 rows), 80 positions (one length, 10, would take 100):
    # [six of 3 to 5 in two batches] and [9 9 | 10 + a filling row]
    assert (grid["positions"], grid["batches"], grid["shapes"]) == (2 * 20 + 2 * 20, 4, 2)
    assert grid["tensor_positions"] == 2 * grid["positions"] and grid["padding"] == 1 - 52 / 80


def test_the_script_prints_both_corpora_with_the_grids_it_is_given(tmp_path):
    out = tmp_path / "grid.json"
    result = subprocess.run([sys.executable, "experiments/benchmarks/shape_grid.py", "--pairs", "5000", "--grids",
                             "4", "8", "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads(out.read_text())["WMT-like"]
    assert [r["grid"] for r in rows] == [None, 4, 8]
    assert rows[1]["shapes"] <= 4 and rows[2]["shapes"] <= 8 and all(r["positions"] >= rows[0]["positions"]
                                                                   for r in rows)
    assert "| WMT-like | shape_grid=8 |" in result.stdout
