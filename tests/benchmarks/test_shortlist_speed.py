"""experiments/benchmarks/decode_speed.py --what shortlist, run as a process on a stand-in for run.py (fake_run.py:
known seconds): the table built once, the overrides of each variant, the seconds read from
task=translate's log line, and per pair the median of the per-round ratios (by hand here)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

SECONDS = {"fp32": [4.0, 3.0, 6.0], "fp32 shortlist": [2.0, 3.0, 4.0], "int8": [3.0, 2.0, 1.0],
           "int8 shortlist": [3.0, 1.0, 4.0]}  # per variant, its seconds in rounds 1, 2, 3


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[dict, list[dict], str]:
    """decode_speed.py --what shortlist's JSON, the stand-in's calls and the script's stdout: 3 rounds."""
    folder = tmp_path_factory.mktemp("shortlist")
    (folder / "m.ckpt").write_bytes(b"weights")
    (folder / "in.txt").write_text("a b\nc d\n", encoding="utf-8")
    (folder / "ref.txt").write_text("<a b>\n<c d>\n", encoding="utf-8")
    env = {**os.environ, "FAKE_CALLS": str(folder / "calls.jsonl"), "FAKE_SECONDS": json.dumps(SECONDS)}
    result = subprocess.run([sys.executable, "experiments/benchmarks/decode_speed.py", "--what", "shortlist", "--ckpt",
                             str(folder / "m.ckpt"), "--source", str(folder / "in.txt"), "--reference",
                             str(folder / "ref.txt"),
                             "--candidates", "20", "--run-py", str(Path(__file__).with_name("fake_run.py")),
                             "--json", str(folder / "out.json")], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    return json.loads((folder / "out.json").read_text()), calls, result.stdout


def test_each_variant_is_its_quantize_and_shortlist(measured):
    _, (shortlist, *translations), _ = measured
    assert shortlist["task"] == "shortlist" and shortlist["task.candidates"] == "20"  # the table, built once
    assert len(translations) == 12 and all(t["task"] == "translate" and t["decoding.beam_size"] == "4"
                                           and t["ckpt_path"] == shortlist["ckpt_path"] for t in translations)
    variants = [(t["quantize"], t["decoding.shortlist"]) for t in translations]
    assert variants[:4] == [("none", "false"), ("none", "true"), ("int8", "false"), ("int8", "true")]


def test_the_median_of_per_round_ratios_without_over_with(measured):
    out, _, stdout = measured
    fp32, int8 = out["ratios"]
    assert fp32["rounds"] == [2.0, 1.0, 1.5] and fp32["median"] == 1.5
    assert int8["rounds"] == [1.0, 2.0, 0.25] and int8["median"] == 1.0
    assert out["bleu"] == pytest.approx(dict.fromkeys(SECONDS, 100.0))
    assert "| fp32 | fp32 shortlist | 1.50x | 2.00 / 1.00 / 1.50 | 100.00 / 100.00 |" in stdout


def test_the_seconds_are_task_translates_own(measured):
    out, _, _ = measured
    assert [r[variant]["seconds"] for r in out["rounds"] for variant in SECONDS] == [
        s for r in range(3) for s in (SECONDS[v][r] for v in SECONDS)]
