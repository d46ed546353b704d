"""experiments/benchmarks/decode_speed.py --what models, run as a process on a stand-in for run.py (fake_run.py:
the n-th translation of a variant takes n seconds): each engine and search of both checkpoints a task=translate
process of its own with int8 weights (--shortlist versus: the student's with its lexical table), the runs of a
round in turns, and per engine and search the median of the per-round speed-ups of --versus, computed here by
hand from the calls the stand-in recorded."""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

ROUNDS = 3


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[dict, list[dict], str, Path]:
    """decode_speed.py --what models' JSON, the stand-in's calls, the script's stdout and the folder."""
    folder = tmp_path_factory.mktemp("models")
    for name in ("teacher.ckpt", "student.ckpt"):
        (folder / name).write_bytes(b"weights")
    (folder / "in.txt").write_text("a b\nc d\n", encoding="utf-8")
    (folder / "ref.txt").write_text("<a b>\n<c d>\n", encoding="utf-8")
    seconds = {variant: [float(n) for n in range(1, 4 * ROUNDS + 1)] for variant in ("int8", "int8 shortlist")}
    env = {**os.environ, "FAKE_CALLS": str(folder / "calls.jsonl"), "FAKE_SECONDS": json.dumps(seconds)}
    result = subprocess.run([sys.executable, "experiments/benchmarks/decode_speed.py", "--what", "models",
                             "--ckpt", str(folder / "teacher.ckpt"), "--versus", str(folder / "student.ckpt"),
                             "--source", str(folder / "in.txt"), "--reference", str(folder / "ref.txt"),
                             "--rounds", str(ROUNDS), "--shortlist", "versus", "--json", str(folder / "out.json"),
                             "--run-py", str(Path(__file__).with_name("fake_run.py"))], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    [table] = [c for c in calls if c["task"] == "shortlist"]  # the student's table, built first, on a copy
    assert calls[0] is table and Path(table["ckpt_path"]).name == "student.ckpt" and table["task.candidates"] == "30"
    student = table["ckpt_path"]
    assert student != str(folder / "student.ckpt") and not Path(student).exists()  # a copy, gone with its folder
    calls = [{**c, "ckpt_path": str(folder / "student.ckpt")} if c["ckpt_path"] == student else c for c in calls[1:]]
    return json.loads((folder / "out.json").read_text()), calls, result.stdout, folder


def run_of(call: dict, folder: Path) -> tuple[str, str, str]:
    """(engine, search, checkpoint) of a recorded task=translate call."""
    engine = "CTranslate2" if call.get("task.engine") == "ctranslate2" else "ours"
    search = "beam 4" if call["decoding"] == "beam" else "greedy"
    return engine, search, "versus" if call["ckpt_path"] == str(folder / "student.ckpt") else "ckpt"


def test_each_run_is_an_int8_translate_process_and_a_round_runs_each_once_in_turn(measured):
    _, calls, _, folder = measured
    assert len(calls) == 8 * ROUNDS and all(c["task"] == "translate" and c["quantize"] == "int8" for c in calls)
    assert all(c["decoding.beam_size"] == "4" for c in calls if c["decoding"] == "beam")
    assert all(c["decoding.shortlist"] == str(run_of(c, folder)[2] == "versus").lower() for c in calls)
    assert {c["decoding"] for c in calls} == {"greedy", "beam"}
    rounds = [[run_of(c, folder) for c in calls[8 * r : 8 * r + 8]] for r in range(ROUNDS)]
    assert all(len(set(r)) == 8 for r in rounds)  # each engine x search x checkpoint once a round
    assert rounds[1] == [*rounds[0][1:], rounds[0][0]]  # the next round starts with the next one


def test_the_speed_up_of_versus_is_the_median_of_per_round_ratios(measured):
    out, calls, stdout, folder = measured
    seconds, counts = [{} for _ in range(ROUNDS)], {"ckpt": 0, "versus": 0}
    for n, call in enumerate(calls):  # the n-th translation of a variant (with a shortlist or not) took n seconds
        counts[run_of(call, folder)[2]] += 1
        seconds[n // 8][run_of(call, folder)] = float(counts[run_of(call, folder)[2]])
    for ratio in out["ratios"]:
        engine, search = ratio["a"].split(" ", 1)[0], ratio["a"].split(" ", 1)[1].rsplit(" ", 1)[0]
        per_round = [s[engine, search, "ckpt"] / s[engine, search, "versus"] for s in seconds]
        assert ratio["rounds"] == pytest.approx(per_round) and ratio["median"] == pytest.approx(
            statistics.median(per_round))
    assert len(out["ratios"]) == 4 and f"| ours | greedy | {out['ratios'][0]['median']:.2f}x |" in stdout
    assert "100.00 / 100.00" in stdout  # the stand-in's translations are the references
