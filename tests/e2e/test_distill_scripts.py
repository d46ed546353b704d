"""Issue 51's subcommands of experiments/multi30k/tables.py: corpus (the distilled corpus against
the original, counted by hand here), curves (several runs' learning curves in one figure) and scores
(run folders' scores in one table)."""

import json

import pytest

from tests.helpers import load_script


def test_corpus_stats_counts_words_vocabulary_and_the_targets_equal_to_the_reference(tmp_path, monkeypatch, capsys):
    (tmp_path / "orig.de").write_text("ein Hund läuft\nzwei Katzen schlafen hier\nein Mann\n", encoding="utf-8")
    (tmp_path / "dist.de").write_text("ein Hund rennt\nzwei Katzen schlafen\nein Mann \n", encoding="utf-8")
    script = load_script("experiments/multi30k/tables.py")
    monkeypatch.setattr("sys.argv", ["tables.py", "corpus", str(tmp_path / "orig.de"), str(tmp_path / "dist.de")])
    script.main()
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()]
    rows = {row[0]: row[1:] for row in cells}
    # original: 9 words, 8 distinct (ein twice), 7 seen once; distilled: 8 words, 7 distinct, 6 seen once
    assert rows["lines"] == ["3", "3"]
    assert rows["words"] == ["9", "8"]
    assert rows["words a line"] == ["3.00", "2.67"]
    assert rows["distinct words"] == ["8", "7"] and rows["words seen once"] == ["7", "6"]
    assert rows["length ratio (distilled / original words)"] == ["", "0.889"]
    assert rows["targets equal to the reference"] == ["", "1 (33.3%)"]  # "ein Mann " equals "ein Mann"


def test_corpus_stats_refuses_files_of_different_lengths_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "a").write_text("x\ny\n")
    (tmp_path / "b").write_text("x\n")
    script = load_script("experiments/multi30k/tables.py")
    monkeypatch.setattr("sys.argv", ["tables.py", "corpus", str(tmp_path / "a"), str(tmp_path / "b")])
    with pytest.raises(SystemExit, match=r"^error: .*a has 2 lines, .*b 1$"):
        script.main()


def test_curves_draws_every_run_and_names_a_folder_without_curves(tmp_path, monkeypatch):
    for name, bleu in (("member", 30.0), ("student", 35.0)):
        (tmp_path / name / "plots").mkdir(parents=True)
        (tmp_path / name / "plots" / "curves.csv").write_text(
            f"step,metric,value\n20,train/loss,5.0\n100,val/loss,4.0\n100,val/bleu,{bleu}\n200,val/bleu,{bleu + 1}\n")
    script = load_script("experiments/multi30k/tables.py")
    drawn, figure = [], script.plots.curves_figure

    def spy(runs, title):
        drawn.append((runs, title))
        return figure(runs, title)

    monkeypatch.setattr(script.plots, "curves_figure", spy)
    out = tmp_path / "students.png"
    monkeypatch.setattr("sys.argv", ["tables.py", "curves", str(out), f"seed 1235={tmp_path}/member",
                                     f"distilled={tmp_path}/student"])
    script.main()
    [(runs, title)] = drawn
    assert title == "students" and list(runs) == ["seed 1235", "distilled"]
    assert runs["distilled"]["val/bleu"] == [(100, 35.0), (200, 36.0)]
    assert runs["seed 1235"]["train/loss"] == [(20, 5.0)]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setattr("sys.argv", ["tables.py", "curves", str(out), f"x={tmp_path}/nothing"])
    with pytest.raises(SystemExit, match=r"^error: x=.*nothing: no .*nothing/plots/curves.csv"):
        script.main()


def test_scores_tables_each_runs_split_and_marks_a_score_it_lacks(tmp_path, monkeypatch, capsys):
    (tmp_path / "val").mkdir()
    (tmp_path / "val" / "metrics.json").write_text(json.dumps(
        {"split": "val", "val/bleu": 40.126, "val/bleu_tok_lc": 41.5, "val/chrf": 65.0, "val/ter": 44.004,
         "test/bleu": 1.0}))
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "metrics.json").write_text(json.dumps({"test/bleu": 39.0, "test/chrf": 60.0,
                                                                  "test/ter": 50.0, "val/bleu": 38.0}))
    script = load_script("experiments/multi30k/tables.py")
    monkeypatch.setattr("sys.argv", ["tables.py", "scores", f"a, b={tmp_path}/val", f"trained={tmp_path}/train"])
    script.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:] == ["| a, b | val | 41.50 | 40.13 | 65.00 | 44.00 |",
                         "| trained | test | - | 39.00 | 60.00 | 50.00 |"]
    monkeypatch.setattr("sys.argv", ["tables.py", "scores", f"x={tmp_path}/nothing"])
    with pytest.raises(SystemExit, match=r"^error: .*nothing/metrics.json: no such file"):
        script.main()
