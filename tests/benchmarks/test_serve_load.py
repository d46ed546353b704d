"""experiments/benchmarks/decode_speed.py --what serve, run as a process on a stand-in for run.py (fake_run.py: a
server that fails one sentence, refuses another with a 503 and mixes up a third): a level's figures against its
own latencies (nearest-rank p99, the median), sentences per second counting answered requests only, 503s,
errors and mix-ups apart, for closed-loop clients and open-loop Poisson arrivals; paragraph requests checked
against the offline translations of their sentences, joined."""

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import ROOT


def measured(folder: Path, lines: str, *options: str) -> dict:
    (folder / "in.txt").write_text(lines, encoding="utf-8")
    (folder / "m.ckpt").write_bytes(b"weights")
    done = subprocess.run([sys.executable, "experiments/benchmarks/decode_speed.py", "--what", "serve", "--ckpt",
                           str(folder / "m.ckpt"), "--source", str(folder / "in.txt"), "--run-py",
                           str(Path(__file__).with_name("fake_run.py")), "--json", str(folder / "out.json"), *options],
                          cwd=ROOT, env={**os.environ, "FAKE_CALLS": str(folder / "calls.jsonl")}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((folder / "out.json").read_text())


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    """1 and 4 clients, then arrivals at half the offline rate: 12 requests each over 5 lines (one fails, one is
    refused, one is mixed up)."""
    return measured(tmp_path_factory.mktemp("serve"), "a b\nerror\nc d\nmixup\nbusy\n", "--clients", "1,4",
                    "--rates", "0.5", "--requests", "12")


def test_nearest_rank_percentile(result):
    for level in result["levels"]:
        ordered = sorted(level["latencies_ms"])
        assert level["p99_ms"] == ordered[math.ceil(0.99 * len(ordered)) - 1]  # nearest rank: here the largest
        assert level["p50_ms"] == pytest.approx(statistics.median(ordered))


def test_a_level_counts_answered_requests_and_its_errors_apart(result):
    """Requests 0..11 cycle over the 5 lines: "error" at 1, 6, 11, "mixup" at 3, 8, "busy" at 4, 9."""
    assert result["offline_sentences_per_s"] == 10.0  # the 5 lines in the stand-in's 0.5 s
    assert [level["load"] for level in result["levels"]] == ["1", "4", "50%"]
    for level in result["levels"]:
        assert (level["requests"], level["errors"], level["refused"], level["mixups"]) == (12, 3, 2, 2)
        assert len(level["latencies_ms"]) == 7
        assert level["sentences_per_s"] == pytest.approx(7 / level["seconds"])


def test_open_loop_arrivals_come_at_the_rate_asked(result):
    """Half the offline rate: 5 requests a second, so 12 arrivals take about 2.4 s (an exponential gap
    each, seeded); the level cannot end before its last arrival."""
    assert 1.0 < result["levels"][2]["seconds"] < 6.0


def test_paragraph_requests_are_checked_against_their_sentences_offline(tmp_path):
    lines = "".join(f"Sentence number {i}. It has two parts.\n" for i in range(24))
    got = measured(tmp_path, lines, "--paragraphs", "--clients", "2", "--requests", "6")
    level = got["levels"][0]
    assert got["paragraphs"] and (level["requests"], level["errors"], level["mixups"]) == (6, 0, 0)
    sizes, used = np.random.default_rng(0).integers(5, 11, 24).tolist(), 0  # the benchmark's paragraphs
    while used + sizes[0] <= 24:
        used += sizes.pop(0)
    # the paragraphs' lines, each two sentences to the splitter, translated offline in 0.5 s
    assert got["offline_sentences_per_s"] == 2 * used / 0.5
