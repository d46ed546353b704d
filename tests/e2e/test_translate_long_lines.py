"""task=translate task.long_lines: an input line longer than the model takes (the shipped Multi30k
model: max_positions=512) stops the run (error, default), gets an empty output (skip) or is cut to
fit (truncate); output lines stay one for one with input lines, each skipped or truncated line is
named in a warning, and one line at the end counts them over the whole input."""

import io
import logging
import sys

import pytest

from tests.helpers import ROOT, compose_config, not_our_checkpoint
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.inference.long_lines import LongLines
from transformer_mt.tasks import run

SHIPPED = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"
LONG = " ".join(["A man is riding a bicycle down the street."] * 60)  # 601 tokens with EOS
SHORT = ["A dog runs on the beach.", "Two dogs are playing in the snow."]
FAST = ["decoding.options.max_len_a=0", "decoding.options.max_len_b=8"]  # short outputs: a fast test
LIMIT = "more than the model's max_positions=512 allows"
OTHERS = "(task.long_lines=skip or truncate translates the others)"


def said(caplog) -> list[str]:
    """The warnings logged (what stderr shows after `[time][logger][WARNING] - `)."""
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "long_lines" in r.name]


def from_file(tmp_path, lines: list[str], *overrides: str) -> list[str]:
    """task=translate of `lines` (a file in, a file out) with the shipped model, in this process."""
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines))
    run(compose_config(tmp_path / "run", ["task=translate", f"ckpt_path={SHIPPED}", f"task.input={tmp_path}/in.txt",
                                          f"task.output={tmp_path}/out.txt", *FAST, *overrides]))
    return (tmp_path / "out.txt").read_text().split("\n")[:-1]


def test_a_long_line_stops_the_run_by_default_with_nothing_written(tmp_path):
    with pytest.raises(DataError) as err:
        from_file(tmp_path, [SHORT[0], LONG])
    assert str(err.value) == f"{tmp_path}/in.txt:2: 601 tokens, {LIMIT} {OTHERS}"
    assert not (tmp_path / "out.txt").exists()


def test_skip_gives_an_empty_nbest_and_counts_across_chunks(tmp_path, monkeypatch, capsys, caplog):
    """stdin read 2 lines at a time (3 chunks), 2-best with scores: a skipped line has the rows an
    empty line has; the count at the end spans the chunks."""
    lines = [SHORT[0], LONG, "", SHORT[1], LONG]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("".join(x + "\n" for x in lines).encode())))
    run(compose_config(tmp_path / "run", ["task=translate", f"ckpt_path={SHIPPED}", "task.buffer_size=2",
                                          "task.long_lines=skip", "decoding=beam", "decoding.nbest=2", *FAST]))
    rows = [line.split("\t") for line in capsys.readouterr().out.split("\n")[:-1]]
    assert [row[0] for row in rows] == ["0", "0", "1", "1", "2", "2", "3", "3", "4", "4"]
    assert rows[2:6] == [["1", "0.0000", ""]] * 2 + [["2", "0.0000", ""]] * 2
    assert rows[8:] == [["4", "0.0000", ""]] * 2
    assert all(row[2] for row in rows[:2] + rows[6:8])
    assert said(caplog) == [f"stdin:2: 601 tokens, {LIMIT}: skipped (task.long_lines=skip)",
                            f"stdin:5: 601 tokens, {LIMIT}: skipped (task.long_lines=skip)",
                            "skipped 2 of 5 lines longer than the model's max_positions=512 (task.long_lines=skip)"]


def test_skip_with_a_prefix_and_alignments_writes_an_empty_output(tmp_path, caplog):
    out = from_file(tmp_path, [f"{SHORT[0]}\tEin", f"{LONG}\tEin Mann", ""], "task.long_lines=skip",
                    "task.prefix=true", "task.alignment=true", "task.scores=true")
    assert len(out) == 3 and out[0].split("\t")[2].startswith("Ein ")
    assert out[1:] == ["1\t0.0000\t\t", "2\t0.0000\t\t"]
    assert said(caplog)[-1] == "skipped 1 of 3 lines longer than the model's max_positions=512 (task.long_lines=skip)"


def test_truncate_translates_the_first_tokens_with_prefix_and_alignment(tmp_path, caplog):
    """The long line is cut to 511 tokens (its first 510 and EOS); its output starts with the prefix,
    and every output word is linked to a word of the line (of the part translated)."""
    out = from_file(tmp_path, [f"{LONG}\tEin Mann", f"{SHORT[1]}\t", f"{LONG}\t"], "task.long_lines=truncate",
                    "task.prefix=true", "task.alignment=true")
    rows = [line.split("\t") for line in out]
    assert len(rows) == 3 and all(len(row) == 2 for row in rows)
    assert rows[0][0].startswith("Ein Mann ") and rows[2][0]
    words = len(LONG.split())
    for text, alignment in (rows[0], rows[2]):
        links = [tuple(map(int, pair.split("-"))) for pair in alignment.split()]
        assert {j for _, j in links} == set(range(len(text.split())))
        assert all(i < words for i, _ in links)
    place = f"{tmp_path}/in.txt"
    assert said(caplog) == [
        f"{place}:1: 601 tokens, {LIMIT}: truncated to 511 tokens (task.long_lines=truncate)",
        f"{place}:3: 601 tokens, {LIMIT}: truncated to 511 tokens (task.long_lines=truncate)",
        "truncated 2 of 3 lines longer than the model's max_positions=512 (task.long_lines=truncate)"]


def test_fit_keeps_the_eos_of_a_truncated_source():
    rule = LongLines("truncate")
    assert rule.fit([[5, 6, 7, 8, 2], [5, 2], [5, 6, 7, 8]], 4, 2, ["a:1", "a:2", "a:3"]) == [
        [5, 6, 2], [5, 2], [5, 6, 7]]
    assert rule.count == 2
    assert LongLines("skip").fit([[5, 6, 7, 2], [5, 6, 2]], 4, 2, ["a:1", "a:2"]) == [None, [5, 6, 2]]
    with pytest.raises(DataError, match=r"^a:2: 4 tokens, more than the model's max_positions=4 allows "
                                        r"\(task.long_lines=skip or truncate translates the others\)$"):
        LongLines().fit([[5, 2], [5, 6, 7, 2]], 4, 2, ["a:1", "a:2"])


def test_another_value_is_a_config_error_before_the_model_loads(tmp_path):
    not_our_checkpoint(tmp_path / "model.ckpt")
    (tmp_path / "in.txt").write_text("a cat\n")
    with pytest.raises(ConfigError) as err:
        run(compose_config(tmp_path / "run", ["task=translate", f"ckpt_path={tmp_path}/model.ckpt",
                                              f"task.input={tmp_path}/in.txt", "task.long_lines=drop"]))
    assert str(err.value) == "task.long_lines='drop': must be error, skip or truncate"
