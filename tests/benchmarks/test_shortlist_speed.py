"""experiments/benchmarks/shortlist_speed.py: the overrides of each variant, the seconds read from
task=translate's log line, and per pair the median of the per-round ratios (by hand here)."""

import subprocess

from tests.helpers import load_script

speed = load_script("experiments/benchmarks/shortlist_speed.py")


def test_each_variant_is_its_quantize_and_shortlist():
    assert speed.overrides("fp32") == ["quantize=none", "decoding.shortlist=false"]
    assert speed.overrides("int8 shortlist") == ["quantize=int8", "decoding.shortlist=true"]


def test_the_median_of_per_round_ratios_without_over_with():
    measured = [{"fp32": 4.0, "fp32 shortlist": 2.0, "int8": 3.0, "int8 shortlist": 3.0},
                {"fp32": 3.0, "fp32 shortlist": 3.0, "int8": 2.0, "int8 shortlist": 1.0},
                {"fp32": 6.0, "fp32 shortlist": 4.0, "int8": 1.0, "int8 shortlist": 4.0}]
    fp32, int8 = speed.ratios(measured)
    assert fp32["rounds"] == [2.0, 1.0, 1.5] and fp32["median"] == 1.5
    assert int8["rounds"] == [1.0, 2.0, 0.25] and int8["median"] == 1.0


def test_the_seconds_are_task_translates_own(tmp_path, monkeypatch):
    def fake_run(command, stdout, stderr, text, cwd):
        run_dir = next(a.split("=", 1)[1] for a in command if a.startswith("hydra.run.dir="))
        (tmp_path / run_dir).mkdir(parents=True, exist_ok=True)
        (tmp_path / run_dir / "run.log").write_text("[..][transformer_mt.tasks.translate][INFO] - translated 1000 "
                                                    "lines in 12.5 s (80.0 lines/s)\n")
        assert "decoding.shortlist=true" in command and "quantize=int8" in command and "decoding.beam_size=4" in command
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(speed.subprocess, "run", fake_run)
    seconds, output = speed.translate("int8 shortlist", tmp_path / "m.ckpt", "in.txt", tmp_path, [])
    assert seconds == 12.5 and output == tmp_path / "int8_shortlist.txt"
