"""experiments/benchmarks/decode_speed.py --rounds, run as a process, its processes a stand-in for
itself (--script fake_decode_speed.py: known seconds): each system measured in a process of its own,
the order rotated every round, the setup passed on, per pair the median of the per-round ratios
(computed by hand here), and each system again beside busy processes, killed after its run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

SYSTEMS = ["ours float32", "ours int8", "CTranslate2 float32", "CTranslate2 int8"]
# per system, its (greedy, beam 4) seconds in rounds 1, 2, 3
SECONDS = {"ours float32": [(2.0, 4.0), (1.0, 4.0), (1.0, 1.0)], "ours int8": [(1.0, 2.0), (2.0, 4.0), (1.0, 1.0)],
           "CTranslate2 float32": [(2.0, 2.0), (3.0, 2.0), (1.0, 1.0)],
           "CTranslate2 int8": [(1.5, 2.0), (1.0, 3.0), (4.0, 1.0)]}


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[dict, list[dict]]:
    """decode_speed.py --rounds' JSON and the stand-in's calls: 3 rounds, beside 2 busy processes too."""
    folder = tmp_path_factory.mktemp("rounds")
    env = {**os.environ, "FAKE_CALLS": str(folder / "calls.jsonl"), "FAKE_SECONDS": json.dumps(SECONDS)}
    result = subprocess.run([sys.executable, "experiments/benchmarks/decode_speed.py", "--ckpt", "c", "--source", "s",
                             "--reference", "r", "--rounds", "3", "--load", "2", "--inter", "2", "--ct2-intra", "1",
                             "--script", str(Path(__file__).with_name("fake_decode_speed.py")), "--json",
                             str(folder / "out.json")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    return json.loads((folder / "out.json").read_text()), calls


def test_the_median_of_per_round_ratios_not_the_ratio_of_medians(measured):
    result, _ = measured
    table = {(r["ours"], r["peer"], r["search"]): r for r in result["ratios"]}
    greedy = table[("ours int8", "CTranslate2 int8", "greedy")]
    assert greedy["rounds"] == [1.5, 0.5, 4.0] and greedy["median"] == 1.5
    beam = table[("ours float32", "CTranslate2 float32", "beam 4")]
    assert beam["rounds"] == [0.5, 0.5, 1.0] and beam["median"] == 0.5
    assert len(table) == 6


def test_every_system_runs_alone_in_its_own_process_in_a_rotating_order(measured):
    _, calls = measured
    quiet = [c["system"] for c in calls if c["busy"] == 0]
    assert quiet == [*SYSTEMS, *SYSTEMS[1:], SYSTEMS[0], *SYSTEMS[2:], *SYSTEMS[:2]]
    assert all(c["setup"] == ["--inter=2", "--ct2-intra=1"] for c in calls)  # the setup passed on


def test_under_load_each_system_runs_again_beside_busy_processes_killed_after_it(measured):
    result, calls = measured
    assert [c["busy"] for c in calls] == [0, 2] * 12  # each quiet run alone: the busy ones gone after each run
    assert [c["system"] for c in calls[1::2]] == [c["system"] for c in calls[0::2]]  # right after its quiet run
    assert {r["median"] for r in result["slowdowns"]} == {3.0}  # 1 + 2 busy processes, by the stand-in's rule
    loaded = {(r["ours"], r["peer"], r["search"]): r["median"] for r in result["loaded_ratios"]}
    assert loaded[("ours float32", "CTranslate2 float32", "beam 4")] == 0.5
    assert not any(b"while True: pass" in command for command in commands())  # nor after the last one


def commands() -> list[bytes]:
    """The command lines of the processes running now."""
    found = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            found.append(path.read_bytes())
        except OSError:  # it ended meanwhile
            continue
    return found
