"""task=translate with decoding.constraints=true (lines `source<TAB>phrase<TAB>...`) on the shipped
model: every output of the n-best contains every phrase, with an ensemble and int8 too; a line
without constraints gets plain beam search's output; alignments and prefixes keep working; an empty
phrase is one line naming the file and line."""

import pytest

from tests.helpers import ROOT, compose_config
from transformer_mt.errors import DataError
from transformer_mt.tasks import run

SHIPPED = ROOT / "experiments" / "multi30k" / "multi30k_en_de.ckpt"
LINES = [("A man is riding a bicycle down the street.", ["Rad"]),
         ("Two dogs are playing in the snow.", ["Tiere", "weißen Schnee"]),
         ("A girl sits on a bench.", []),
         ("A woman in a red coat walks past a shop.", ["Geschäft", "roten"])]


def translate(tmp_path, lines: list[str], *extra: str) -> list[str]:
    (tmp_path / "in.txt").write_text("".join(f"{line}\n" for line in lines))
    run(compose_config(tmp_path / "run", ["task=translate", f"ckpt_path={SHIPPED}", f"task.input={tmp_path}/in.txt",
                                          f"task.output={tmp_path}/out.txt", "decoding=beam", *extra]))
    return (tmp_path / "out.txt").read_text().splitlines()


@pytest.mark.parametrize("model", [[], [f"ckpt_path=[{SHIPPED},{SHIPPED}]", "quantize=int8"]],
                         ids=["one model", "int8 ensemble"])
def test_every_output_contains_every_constraint(tmp_path, model):
    lines = ["\t".join([source, *phrases]) for source, phrases in LINES]
    out = translate(tmp_path, lines, "decoding.constraints=true", "decoding.nbest=3", *model)
    rows = [line.split("\t") for line in out]  # line<TAB>score<TAB>text, 3 a line
    assert [int(r[0]) for r in rows] == [i for i in range(len(LINES)) for _ in range(3)]
    for number, _, text in rows:
        assert all(phrase in text for phrase in LINES[int(number)][1]), (text, LINES[int(number)][1])
    plain = translate(tmp_path, [source for source, _ in LINES], *model)
    assert [r[2] for r in rows[6:9:3]] == [plain[2]]  # the line without constraints: beam search as it is
    assert not all(all(p in plain[i] for p in phrases) for i, (_, phrases) in enumerate(LINES))


def test_alignments_and_a_prefix_with_constraints(tmp_path):
    lines = [f"{LINES[0][0]}\tEin Junge\tRad"]
    out = translate(tmp_path, lines, "decoding.constraints=true", "task.prefix=true", "task.alignment=true")
    text, alignment = out[0].split("\t")
    assert text.startswith("Ein Junge") and "Rad" in text and all("-" in pair for pair in alignment.split())


def test_an_empty_constraint_names_its_line(tmp_path):
    with pytest.raises(DataError, match=r"in\.txt:2: an empty constraint"):
        translate(tmp_path, ["a cat\tKatze", "a dog\t "], "decoding.constraints=true")
