"""experiments/benchmarks/decode_speed.py --what serve, run as a process on a stand-in for run.py (fake_run.py: a
server that fails one sentence and mixes up another): a level's figures against its own latencies
(nearest-rank p99, the median), sentences per second counting answered requests only, errors and
mix-ups apart."""

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    """decode_speed.py --what serve's JSON: 1 and 4 clients, 12 requests each over 4 lines (one fails, one
    is mixed up)."""
    folder = tmp_path_factory.mktemp("serve")
    (folder / "in.txt").write_text("a b\nerror\nc d\nmixup\n", encoding="utf-8")
    (folder / "m.ckpt").write_bytes(b"weights")
    done = subprocess.run([sys.executable, "experiments/benchmarks/decode_speed.py", "--what", "serve", "--ckpt",
                           str(folder / "m.ckpt"), "--source", str(folder / "in.txt"), "--clients", "1,4",
                           "--requests", "12", "--run-py", str(Path(__file__).with_name("fake_run.py")), "--json",
                           str(folder / "out.json")],
                          cwd=ROOT, env={**os.environ, "FAKE_CALLS": str(folder / "calls.jsonl")}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((folder / "out.json").read_text())


def test_nearest_rank_percentile(result):
    for level in result["levels"]:
        ordered = sorted(level["latencies_ms"])
        assert level["p99_ms"] == ordered[math.ceil(0.99 * len(ordered)) - 1]  # nearest rank: here the largest
        assert level["p50_ms"] == pytest.approx(statistics.median(ordered))


def test_a_level_counts_answered_requests_and_its_errors_apart(result):
    assert result["offline_sentences_per_s"] == 8.0  # the 4 lines in the stand-in's 0.5 s
    for level, clients in zip(result["levels"], (1, 4)):
        assert (level["clients"], level["requests"], level["errors"], level["mixups"]) == (clients, 12, 3, 3)
        assert len(level["latencies_ms"]) == 9
        assert level["sentences_per_s"] == pytest.approx(9 / level["seconds"])
