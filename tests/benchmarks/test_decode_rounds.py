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


def arguments(**given) -> object:
    setup = {name: None for name in rounds_script.SETUP}
    return rounds_script.argparse.Namespace(**{"ckpt": "c", "source": "s", "reference": "r", "rounds": 2,
                                               "limit": None, "load": 0, **setup, **given})


def fake_runs(calls: list, seconds) -> object:
    """subprocess.run for decode_speed.py --only SYSTEM: records (system, its other options), writes
    seconds(system) for both searches."""
    def fake_run(command, check, stdout):
        system = command[command.index("--only") + 1]
        calls.append((system, [c for c in command if c.startswith("--") and "=" in c]))
        out = command[command.index("--json") + 1]
        rows = [{"search": s, "system": system, "seconds": seconds(system), "bleu": 30.0} for s in ("greedy", "beam 4")]
        with open(out, "w") as f:
            json.dump({"systems": rows}, f)
        return subprocess.CompletedProcess(command, 0)
    return fake_run


def test_every_system_runs_alone_in_its_own_process_in_a_rotating_order(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(rounds_script.subprocess, "run", fake_runs(calls, lambda system: 1.0))
    quiet, loaded = rounds_script.rounds(arguments(inter=2, ct2_intra=1))
    assert [system for system, _ in calls] == [*rounds_script.SYSTEMS, *rounds_script.SYSTEMS[1:],
                                              rounds_script.SYSTEMS[0]]
    assert len(quiet) == 2 and set(quiet[0]) == set(rounds_script.SYSTEMS) and loaded == []
    assert all(options == ["--inter=2", "--ct2-intra=1"] for _, options in calls)  # the setup passed on


def test_under_load_each_system_runs_again_beside_busy_processes(tmp_path, monkeypatch):
    calls, busy = [], []

    class Busy:  # a busy process: alive from its start to its kill
        def __init__(self, command):
            assert command[-1] == rounds_script.BUSY
            busy.append(self)
            self.alive = True

        def kill(self):
            self.alive = False

        def wait(self):
            return 0

    def seconds(system: str) -> float:  # the time of a system, slower by the busy processes alive
        return (2.0 if system.startswith("ours") else 1.0) * (1 + sum(b.alive for b in busy))

    monkeypatch.setattr(rounds_script.subprocess, "Popen", Busy)
    monkeypatch.setattr(rounds_script.subprocess, "run", fake_runs(calls, seconds))
    quiet, loaded = rounds_script.rounds(arguments(load=2))
    assert len(calls) == 2 * 2 * len(rounds_script.SYSTEMS) and len(busy) == 2 * len(calls) // 2
    assert not any(b.alive for b in busy)  # every busy process killed after its run
    slow = {(r["system"], r["search"]): r["median"] for r in rounds_script.slowdowns(quiet, loaded)}
    assert set(slow.values()) == {3.0}  # 1 + 2 busy processes, by the fake's rule
    pairs = {(r["ours"], r["peer"], r["search"]): r["median"] for r in rounds_script.ratios(loaded)}
    assert pairs[("ours float32", "CTranslate2 float32", "beam 4")] == 0.5
