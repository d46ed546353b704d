"""task=translate task.prefix=true: `source<TAB>target prefix` lines; every output (greedy, beam,
sampling, n-best) starts with its prefix exactly, on the default toy job's model; a malformed line is
one error naming the file and line, before the model loads and before any output."""

import io
import re
import sys

import pytest

from tests.helpers import compose_config, not_our_checkpoint
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import DataError
from transformer_mt.tasks import run

FORMAT = "(source<TAB>target prefix, task.prefix=true)"


def translate(checkpoint, tmp_path, lines: list[str], *overrides: str) -> list[str]:
    """task=translate of `lines` (a file in, a file out), in this process; the output lines."""
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines))
    run(compose_config(tmp_path / "run", ["task=translate", f"ckpt_path={checkpoint}", f"task.input={tmp_path}/in.txt",
                                          f"task.output={tmp_path}/out.txt", "task.prefix=true", *overrides]))
    return (tmp_path / "out.txt").read_text().split("\n")[:-1]


def from_stdin(stdin: str, monkeypatch, capsys, tmp_path, *overrides: str) -> str:
    """task=translate task.prefix=true OVERRIDES with `stdin` piped in (not a terminal), in this
    process: a bad line must raise the DataError that run.py prints as one line (exit status 1);
    what reached stdout."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    with pytest.raises(DataError, match=rf"^stdin:3: 0 tabs, expected one {re.escape(FORMAT)}$"):
        run(compose_config(tmp_path / "run", ["task=translate", "task.prefix=true", *overrides]))
    return capsys.readouterr().out


def prefixed_lines() -> tuple[list[str], list[str], list[str]]:
    """Toy test sentences with target prefixes of 0 to 3 reference words, a wrong start, one that
    ends inside a word, one the tokenizer cannot spell (capitals, ü) and one with extra spaces; the
    lines, each prefix as it must start the output (the text rule applied) and the references."""
    test = ToyCorpus().load("test")
    lines, starts, references = [], [], []
    for i in range(40):
        src, ref = test.src[i], test.tgt[i]
        words = ref.split()
        given = [" ".join(words[: i % 4]), "kaj lo", f"{words[0]} {words[1][:2]}", "Lo Hünd", f"  {words[0]}   "][i % 5]
        lines.append(f"{src}\t{given}")
        starts.append(" ".join(given.split()))
        references.append(ref)
    return lines, starts, references


@pytest.mark.slow
@pytest.mark.parametrize("decoding", [
    ["decoding=greedy"],
    ["decoding=beam", "decoding.nbest=2"],
    ["decoding=sample", "decoding.nbest=3", "decoding.seed=5"],
])
def test_every_output_starts_with_its_prefix(toy_run, tmp_path, decoding):
    lines, starts, _ = prefixed_lines()
    lines += ["", "\tlo hund", "the dog sees a cat\t"]  # empty; no source: the prefix; an empty prefix
    starts += ["", "lo hund", ""]
    out = translate(f"{toy_run[0]}/checkpoints/best.ckpt", tmp_path, lines, *decoding)
    n = 1 if decoding == ["decoding=greedy"] else len(out) // len(lines)
    rows = [row.split("\t") for row in out]
    texts = [row[-1] for row in rows]
    assert len(texts) == n * len(lines)
    for i, start in enumerate(starts):
        for text in texts[i * n : (i + 1) * n]:
            assert text.startswith(start), (lines[i], text)
    assert texts[-2 * n] == "lo hund" and texts[-3 * n] == ""
    assert texts[-n] == "lo hund na miska vidas" or decoding[0] == "decoding=sample"


@pytest.mark.slow
def test_a_right_prefix_is_continued_as_the_reference_and_a_wrong_one_costs_its_log_probability(toy_run, tmp_path,
                                                                                               record_property):
    """Greedy, with the first words of the reference forced: the model goes on to the reference
    (the toy task is learned); the score counts the forced tokens, so a wrong start scores lower."""
    checkpoint = f"{toy_run[0]}/checkpoints/best.ckpt"
    test = ToyCorpus().load("test")
    lines = [f"{s}\t{' '.join(t.split()[:k])}" for s, t in zip(test.src[:30], test.tgt[:30]) for k in (1, 3)]
    out = translate(checkpoint, tmp_path, lines + [f"{test.src[0]}\t", f"{test.src[0]}\tkaj kaj"], "task.scores=true")
    texts = [row.split("\t")[2] for row in out]
    references = [t for t in test.tgt[:30] for _ in (1, 3)]
    record_property("continued_as_the_reference", sum(a == b for a, b in zip(texts, references)) / len(references))
    assert sum(a == b for a, b in zip(texts, references)) >= 0.8 * len(references)
    free, wrong = (float(row.split("\t")[1]) for row in out[-2:])
    record_property("free_minus_wrong", free - wrong)
    assert texts[-1].startswith("kaj kaj") and wrong < free - 5


def test_a_line_without_one_tab_names_its_file_and_line_before_the_model_loads(tmp_path):
    not_our_checkpoint(tmp_path / "model.ckpt")
    lines = ["a cat\tna", "", "the dog sees a cat", "a dog\tlo"]
    with pytest.raises(DataError) as err:
        translate(tmp_path / "model.ckpt", tmp_path, lines)
    assert str(err.value) == f"{tmp_path}/in.txt:3: 0 tabs, expected one {FORMAT}"
    with pytest.raises(DataError) as err:
        translate(tmp_path / "model.ckpt", tmp_path, ["a cat\tna\tlo"])
    assert str(err.value) == f"{tmp_path}/in.txt:1: 2 tabs, expected one {FORMAT}"
    assert not (tmp_path / "out.txt").exists()


def test_a_line_without_a_tab_on_stdin_is_one_clean_error(tmp_path, monkeypatch, capsys):
    not_our_checkpoint(tmp_path / "model.ckpt")  # never read: the input is checked first
    out = from_stdin("a cat\tna\n\nthe dog sees a cat\n", monkeypatch, capsys, tmp_path,
                     f"ckpt_path={tmp_path}/model.ckpt")
    assert out == ""


@pytest.mark.slow
def test_streamed_lines_are_checked_as_they_come(toy_run, tmp_path, monkeypatch, capsys):
    """With task.buffer_size=1 the lines before the bad one are translated, as for invalid UTF-8."""
    out = from_stdin("the dog sees a cat\tlo\nthe cat\tna\na bad line\nthe cat\tna\n", monkeypatch, capsys,
                     tmp_path, f"ckpt_path={toy_run[0]}/checkpoints/best.ckpt", "task.buffer_size=1")
    assert [line.split()[0] for line in out.splitlines()] == ["lo", "na"]
