"""experiments/benchmarks/decode_rounds.py: each system measured in a process of its own, the order
rotated every round, and per pair the median of the per-round ratios (computed by hand here)."""

import json
import subprocess

from tests.helpers import load_script

rounds_script = load_script("experiments/benchmarks/decode_rounds.py")


def test_the_median_of_per_round_ratios_not_the_ratio_of_medians():
    def round_of(of32, oi8, c32, ci8):
        searches = ("greedy", "beam 4")
        def system(seconds):
            return {search: {"seconds": s, "bleu": 30.0} for search, s in zip(searches, seconds)}

        return {"ours float32": system(of32), "ours int8": system(oi8), "CTranslate2 float32": system(c32),
                "CTranslate2 int8": system(ci8)}

    measured = [round_of((2.0, 4.0), (1.0, 2.0), (2.0, 2.0), (1.5, 2.0)),
                round_of((1.0, 4.0), (2.0, 4.0), (3.0, 2.0), (1.0, 3.0)),
                round_of((1.0, 1.0), (1.0, 1.0), (1.0, 1.0), (4.0, 1.0))]
    table = {(r["ours"], r["peer"], r["search"]): r for r in rounds_script.ratios(measured)}
    greedy = table[("ours int8", "CTranslate2 int8", "greedy")]
    assert greedy["rounds"] == [1.5, 0.5, 4.0] and greedy["median"] == 1.5
    beam = table[("ours float32", "CTranslate2 float32", "beam 4")]
    assert beam["rounds"] == [0.5, 0.5, 1.0] and beam["median"] == 0.5
    assert len(table) == 6


def test_every_system_runs_alone_in_its_own_process_in_a_rotating_order(tmp_path, monkeypatch):
    calls = []

    def fake_run(command, check, stdout):
        system = command[command.index("--only") + 1]
        calls.append(system)
        out = command[command.index("--json") + 1]
        rows = [{"search": s, "system": system, "seconds": 1.0, "bleu": 30.0} for s in ("greedy", "beam 4")]
        with open(out, "w") as f:
            json.dump({"systems": rows}, f)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(rounds_script.subprocess, "run", fake_run)
    args = rounds_script.argparse.Namespace(ckpt="c", source="s", reference="r", rounds=2, limit=None)
    measured = rounds_script.rounds(args)
    assert calls == [*rounds_script.SYSTEMS, *rounds_script.SYSTEMS[1:], rounds_script.SYSTEMS[0]]
    assert len(measured) == 2 and set(measured[0]) == set(rounds_script.SYSTEMS)
