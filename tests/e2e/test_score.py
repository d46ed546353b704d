"""task=score (forced decoding) on the shipped Multi30k model: it gives beam search's own outputs the
scores beam search reported, its sums are the model's log-softmax, the input forms agree, and bad
input is one line naming the file and line."""

import io
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers import ROOT, compose_config
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.inference.members import load_translator
from transformer_mt.tasks import run

SHIPPED = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"
SOURCES = ["A man is riding a bicycle down the street.", "Two dogs are playing in the snow.",
           "A little girl is eating an apple.", "Three women are sitting on a bench in the park.",
           "A boy in a red shirt jumps into the lake.", "People are walking past a large building."]
TARGETS = ["Ein Mann fährt mit dem Fahrrad.", "Zwei Hunde spielen im Schnee.", "Ein Mädchen isst einen Apfel.",
           "Drei Frauen sitzen auf einer Bank.", "", "Leute gehen an einem Gebäude vorbei."]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def numbers(rows: list[list[str]]) -> list[float]:
    return [float(x) for row in rows for x in row]


def score(tmp_path: Path, *args: str) -> list[list[str]]:
    """`python run.py task=score ARGS` in this process: its output's lines, split at tabs."""
    out = tmp_path / "scores.txt"
    overrides = ["task=score", f"ckpt_path={SHIPPED}", f"task.output={out}", "trainer.accelerator=cpu", *args]
    run(compose_config(tmp_path / "run", overrides))
    return [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("norm", ["PowerLength decoding.length_norm.alpha=1.0",
                                  "GnmtLength decoding.length_norm.alpha=0.6"])
def test_beam_search_outputs_score_what_beam_search_reported(tmp_path, norm):
    name, alpha = norm.split()
    beam = ["decoding=beam", "decoding.beam_size=5", f"decoding.length_norm._target_=transformer_mt.decoding.{name}",
            alpha]
    source = write_lines(tmp_path / "src.en", SOURCES)
    translate = ["task=translate", f"ckpt_path={SHIPPED}", f"task.input={source}", f"task.output={tmp_path}/beam.txt",
                 "task.scores=true", "trainer.accelerator=cpu", *beam]
    run(compose_config(tmp_path / "translate", translate))
    rows = [line.split("\t") for line in (tmp_path / "beam.txt").read_text(encoding="utf-8").splitlines()]
    target = write_lines(tmp_path / "hyp.de", [text for _, _, text in rows])
    scored = score(tmp_path, f"task.source={source}", f"task.target={target}", "task.normalize=true", *beam)
    assert len(scored) == len(SOURCES)
    for (_, reported, _), (total, normalized) in zip(rows, scored):
        assert abs(float(normalized) - float(reported)) <= 1e-4, (normalized, reported)
        assert float(total) < float(normalized) < 0  # the sum, normalized by more than one token's length


def test_the_sum_is_the_model_log_softmax_of_the_target_and_eos(tmp_path):
    source, target = write_lines(tmp_path / "src.en", SOURCES[:2]), write_lines(tmp_path / "tgt.de", TARGETS[:2])
    (total, average, tokens), _ = score(tmp_path, f"task.source={source}", f"task.target={target}",
                                        "task.token_scores=true")
    translator = load_translator([SHIPPED], None)
    src = torch.tensor(translator.tokenizer.encode_sources(SOURCES[:1]))
    tgt = translator.tokenizer.tgt.encode(TARGETS[:1])[0]
    with torch.no_grad():
        lprobs = translator.models[0](src, torch.tensor([[translator.bos_id, *tgt]])).log_softmax(dim=-1)[0]
    by_hand = [lprobs[i, token].item() for i, token in enumerate([*tgt, translator.eos_id])]
    assert abs(float(total) - sum(by_hand)) < 1e-5
    assert abs(float(average) - sum(by_hand) / len(by_hand)) < 1e-5  # per token, EOS counted
    assert [float(t) for t in tokens.split(" ")] == pytest.approx(by_hand, abs=1e-5)


def test_tsv_two_files_stdin_and_batches_give_the_same_scores(tmp_path, monkeypatch, capsys):
    source, target = write_lines(tmp_path / "src.en", SOURCES), write_lines(tmp_path / "tgt.de", TARGETS)
    table = write_lines(tmp_path / "pairs.tsv", [f"{s}\t{t}" for s, t in zip(SOURCES, TARGETS)])
    files = score(tmp_path, f"task.source={source}", f"task.target={target}")
    assert score(tmp_path, f"task.input={table}") == files
    one_a_batch = score(tmp_path, f"task.input={table}", "task.max_tokens=1")  # other batches, same order
    assert numbers(one_a_batch) == pytest.approx(numbers(files), abs=1e-5)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(table.read_bytes())))
    run(compose_config(tmp_path / "run", ["task=score", f"ckpt_path={SHIPPED}", "trainer.accelerator=cpu"]))
    assert [line.split("\t") for line in capsys.readouterr().out.splitlines()] == files


def test_bad_input_is_named_before_the_model_loads(tmp_path):
    """model.ckpt is a torch file but no checkpoint of ours: loading it would stop the run with another
    error (a file that cannot be a checkpoint at all is refused first, before torch is imported)."""
    torch.save({"weights": torch.zeros(3)}, tmp_path / "model.ckpt")
    source, short = write_lines(tmp_path / "src.en", SOURCES), write_lines(tmp_path / "tgt.de", TARGETS[:4])
    table = write_lines(tmp_path / "pairs.tsv", ["a cat\teine Katze", "a dog", "x\ty\tz"])
    cases = [([f"task.source={source}", f"task.target={short}"], DataError,
              f"{source} has 6 lines but {short} has 4: files must be aligned"),
             ([f"task.source={source}", f"task.target={tmp_path}/nope.de"], DataError,
              f"{tmp_path}/nope.de: no such file"),
             ([f"task.input={table}"], DataError, f"{table}:2: 0 tabs, expected one (source<TAB>target)"),
             ([f"task.source={source}"], ConfigError, f"task.source={source}: task.target=FILE is needed too"),
             ([f"task.input={table}", f"task.target={short}"], ConfigError,
              f"task.input={table} and task.source / task.target both given")]
    for args, error, message in cases:
        with pytest.raises(error) as err:
            run(compose_config(tmp_path / "run", ["task=score", f"ckpt_path={tmp_path}/model.ckpt", *args]))
        assert str(err.value).startswith(message)


def test_a_target_longer_than_the_model_is_one_line_naming_it(tmp_path):
    source = write_lines(tmp_path / "src.en", SOURCES[:3])
    target = write_lines(tmp_path / "tgt.de", [TARGETS[0], "der " * 600, TARGETS[2]])
    with pytest.raises(DataError, match=rf"^{target}:2: the target has 601 tokens \(with EOS\), more than the "
                                        r"model takes, model.max_positions=512$"):  # one line, exit status 1
        run(compose_config(tmp_path / "run", ["task=score", f"ckpt_path={SHIPPED}", f"task.source={source}",
                                              f"task.target={target}", f"task.output={tmp_path}/scores.txt"]))
    assert not (tmp_path / "scores.txt").exists()
