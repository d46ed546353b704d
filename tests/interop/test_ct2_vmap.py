"""A checkpoint's lexical table as CTranslate2's vocabulary map (interop/ct2_vmap.py): task=export
task.format=ct2 writes it as vmap.txt in CTranslate2's format (a line of common tokens with an empty
source, then `source<TAB>targets` per source token), and task.engine=ctranslate2 with
decoding.shortlist=true translates with use_vmap=True: CTranslate2's restricted greedy outputs equal
ours over the same rows, line for line, and differ from its unrestricted ones."""

import json

import pytest

from tests.helpers import compose_config, toy_checkpoint_copy
from transformer_mt.inference.members import load_members
from transformer_mt.interop.ct2_vmap import VMAP
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow
pytest.importorskip("ctranslate2")


@pytest.fixture
def checkpoint(toy_run, tmp_path):
    """The default job's best.ckpt, copied, with a small table beside it, and 300 test sources."""
    path = toy_checkpoint_copy(toy_run[0], tmp_path)
    run(compose_config(tmp_path / "build", ["task=shortlist", f"ckpt_path={path}", "task.candidates=1",
                                            "task.frequent=2"]))
    return path


def translate(tmp_path, checkpoint, name: str, *overrides: str) -> list[str]:
    run(compose_config(tmp_path / name, ["task=translate", f"ckpt_path={checkpoint}", f"task.input={tmp_path}/in.txt",
                                         f"task.output={tmp_path}/{name}.txt", "task.max_tokens=100000", *overrides]))
    return (tmp_path / f"{name}.txt").read_text().splitlines()


def test_the_export_writes_the_table_as_vmap_txt(checkpoint, tmp_path):
    run(compose_config(tmp_path / "export", ["task=export", f"ckpt_path={checkpoint}", "task.format=ct2",
                                             f"task.output={tmp_path}/ct2"]))
    table = json.loads(checkpoint.with_name("best.shortlist.json").read_text())
    _, vocabularies, _ = load_members([checkpoint])
    src, tgt = vocabularies.src, vocabularies.tgt
    first, *lines = (tmp_path / "ct2" / VMAP).read_text().splitlines()
    assert first == "\t" + " ".join(tgt.tokens(table["frequent_ids"]))  # the common tokens: an empty source
    expected = {src.tokens([s])[0]: " ".join(tgt.tokens(row)) for s, row in enumerate(table["table"]) if row}
    assert dict(line.split("\t") for line in lines) == expected and len(lines) == len(expected) > 0


def test_ctranslate2_with_the_vmap_decodes_as_ours_with_the_shortlist(checkpoint, tmp_path):
    ours = translate(tmp_path, checkpoint, "ours", "decoding.shortlist=true")
    engine = translate(tmp_path, checkpoint, "ct2", "decoding.shortlist=true", "task.engine=ctranslate2")
    assert engine == ours and len(ours) == 300
    folder = next((checkpoint.parent / "ct2").iterdir())
    assert (folder / VMAP).is_file()
    assert translate(tmp_path, checkpoint, "ct2_all", "task.engine=ctranslate2") != engine  # the vmap restricted it
