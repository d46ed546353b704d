"""Issue 51's subcommands of experiments/multi30k/tables.py, run as processes: corpus (the distilled
corpus against the original, counted by hand here), curves (several runs' learning curves in one
figure) and scores (run folders' scores in one table)."""

import json
import os
import subprocess

from tests.helpers import ROOT, python


def tables(*args) -> subprocess.CompletedProcess:
    """`python experiments/multi30k/tables.py ARGS` (forked from this worker's warm server where it can be)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([python(env), "experiments/multi30k/tables.py", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_corpus_stats_counts_words_vocabulary_and_the_targets_equal_to_the_reference(tmp_path):
    (tmp_path / "orig.de").write_text("ein Hund läuft\nzwei Katzen schlafen hier\nein Mann\n", encoding="utf-8")
    (tmp_path / "dist.de").write_text("ein Hund rennt\nzwei Katzen schlafen\nein Mann \n", encoding="utf-8")
    result = tables("corpus", tmp_path / "orig.de", tmp_path / "dist.de")
    assert result.returncode == 0, result.stderr[-2000:]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in result.stdout.splitlines()]
    rows = {row[0]: row[1:] for row in cells}
    # original: 9 words, 8 distinct (ein twice), 7 seen once; distilled: 8 words, 7 distinct, 6 seen once
    assert rows["lines"] == ["3", "3"]
    assert rows["words"] == ["9", "8"]
    assert rows["words a line"] == ["3.00", "2.67"]
    assert rows["distinct words"] == ["8", "7"] and rows["words seen once"] == ["7", "6"]
    assert rows["length ratio (distilled / original words)"] == ["", "0.889"]
    assert rows["targets equal to the reference"] == ["", "1 (33.3%)"]  # "ein Mann " equals "ein Mann"


def test_corpus_stats_refuses_files_of_different_lengths_in_one_line(tmp_path):
    (tmp_path / "a").write_text("x\ny\n")
    (tmp_path / "b").write_text("x\n")
    result = tables("corpus", tmp_path / "a", tmp_path / "b")
    assert result.returncode == 1 and result.stderr.splitlines() == [f"error: {tmp_path}/a has 2 lines, {tmp_path}/b 1"]


def test_curves_draws_every_run_and_names_a_folder_without_curves(tmp_path):
    for name, bleu in (("member", 30.0), ("student", 35.0)):
        (tmp_path / name / "plots").mkdir(parents=True)
        (tmp_path / name / "plots" / "curves.csv").write_text(
            f"step,metric,value\n20,train/loss,5.0\n100,val/loss,4.0\n100,val/bleu,{bleu}\n200,val/bleu,{bleu + 1}\n")
    out = tmp_path / "students.png"
    result = tables("curves", out, f"seed 1235={tmp_path}/member", f"distilled={tmp_path}/student")
    assert result.returncode == 0, result.stderr[-2000:]
    drawn = result.stdout.splitlines()  # the title, then per run what was drawn, in the order given
    assert drawn[0] == ("students: seed 1235: train/loss 1 points 20:5 .. 20:5; val/loss 1 points 100:4 .. 100:4; "
                        "val/bleu 2 points 100:30 .. 200:31")
    assert drawn[1].startswith("students: distilled: ") and drawn[1].endswith("val/bleu 2 points 100:35 .. 200:36")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = tables("curves", out, f"x={tmp_path}/nothing")
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: x={tmp_path}/nothing: no {tmp_path}/nothing/plots/curves.csv (give " \
                                    "LABEL=RUN, RUN a training run's folder)"


def test_scores_tables_each_runs_split_and_marks_a_score_it_lacks(tmp_path):
    (tmp_path / "val").mkdir()
    (tmp_path / "val" / "metrics.json").write_text(json.dumps(
        {"split": "val", "val/bleu": 40.126, "val/bleu_tok_lc": 41.5, "val/chrf": 65.0, "val/ter": 44.004,
         "test/bleu": 1.0}))
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "metrics.json").write_text(json.dumps({"test/bleu": 39.0, "test/chrf": 60.0,
                                                                  "test/ter": 50.0, "val/bleu": 38.0}))
    result = tables("scores", f"a, b={tmp_path}/val", f"trained={tmp_path}/train")
    assert result.stdout.splitlines()[2:] == ["| a, b | val | 41.50 | 40.13 | 65.00 | 44.00 |",
                                              "| trained | test | - | 39.00 | 60.00 | 50.00 |"]
    result = tables("scores", f"x={tmp_path}/nothing")
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: {tmp_path}/nothing/metrics.json: no such file (an unfinished run?)"
