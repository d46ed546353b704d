"""task=shortlist and decoding.shortlist=true end to end, on the small shared run's checkpoint: the
table is built beside the checkpoint from the corpus it was trained on, with its tokenizer; a table
of every token translates (greedy, beam) and evaluates exactly as no table; with a real one every
output token is a row of its batch; a missing, damaged or foreign table is one line naming it."""

import json
import shutil

import pytest
import torch

from tests.helpers import assert_clean_failure, compose_config, run_py
from transformer_mt.checkpoints.shortlist_file import shortlist_path, vocabulary_digest, write_shortlist
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.decoding import BeamSearch
from transformer_mt.inference.members import load_translator
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow
SOURCES = ToyCorpus().load("test").src[:40]


@pytest.fixture
def checkpoint(small_checkpoint, tmp_path):
    """The small run's last.ckpt, copied (the table is written beside it), and 40 test sources."""
    (tmp_path / "model").mkdir()
    shutil.copy(small_checkpoint, tmp_path / "model" / "last.ckpt")
    (tmp_path / "in.txt").write_text("\n".join(SOURCES) + "\n")
    return tmp_path / "model" / "last.ckpt"


def build(tmp_path, checkpoint, *overrides: str) -> dict:
    run(compose_config(tmp_path / "build", ["task=shortlist", f"ckpt_path={checkpoint}", *overrides]))
    return json.loads(checkpoint.with_name("last.shortlist.json").read_text())


def translate(tmp_path, checkpoint, name: str, *overrides: str) -> list[str]:
    run(compose_config(tmp_path / name, ["task=translate", f"ckpt_path={checkpoint}", f"task.input={tmp_path}/in.txt",
                                         f"task.output={tmp_path}/{name}.txt", *overrides]))
    return (tmp_path / f"{name}.txt").read_text().splitlines()


def test_the_table_is_counted_on_the_checkpoints_training_corpus_and_written_beside_it(checkpoint, tmp_path):
    table = build(tmp_path, checkpoint, "task.candidates=4", "task.frequent=6", "task.scoring=dice")
    hparams = torch.load(checkpoint, weights_only=True)["hyper_parameters"]
    assert table["pairs"] == 300  # the small run's toy corpus (num_train=300), recorded in the checkpoint
    assert table["vocabularies"] == vocabulary_digest(hparams["tokenizer"]) and table["checkpoint"] == "last.ckpt"
    assert (table["scoring"], table["candidates"], table["frequent"]) == ("dice", 4, 6)
    vocab_size = Vocabularies.from_dict(hparams["tokenizer"]).src.vocab_size
    assert len(table["frequent_ids"]) == 6 and len(table["table"]) == vocab_size
    listed = {t for row in table["table"] for t in row}
    assert max(map(len, table["table"])) == 4 and not set(table["frequent_ids"]) & listed
    assert not list(checkpoint.parent.glob(".*"))  # written atomically: no temporary file left


def every_token(checkpoint) -> None:
    """A table beside `checkpoint` whose frequent ids are every target token (the corpus may lack
    some, which an untrained model emits)."""
    vocabularies = Vocabularies.from_dict(torch.load(checkpoint, weights_only=True)["hyper_parameters"]["tokenizer"])
    header = {"vocabularies": vocabulary_digest(vocabularies.to_dict())}
    write_shortlist(shortlist_path(checkpoint), header, list(range(vocabularies.tgt.vocab_size)),
                    [[] for _ in range(vocabularies.src.vocab_size)])


def test_a_table_of_every_token_translates_and_evaluates_exactly_as_none(checkpoint, tmp_path):
    every_token(checkpoint)
    for decoding in (["decoding=greedy"], ["decoding=beam", "decoding.nbest=2", "task.scores=true"]):
        name = decoding[0].split("=")[1]
        assert translate(tmp_path, checkpoint, f"{name}_short", *decoding, "decoding.shortlist=true") == \
            translate(tmp_path, checkpoint, f"{name}_all", *decoding)
    evaluated = [run(compose_config(tmp_path / f"eval_{on}", ["task=evaluate", f"ckpt_path={checkpoint}",
                                                              f"decoding.shortlist={on}"])) for on in ("true", "false")]
    assert evaluated[0]["test/bleu"] == evaluated[1]["test/bleu"] and evaluated[0]["decoding"]["shortlist"] is True
    assert (tmp_path / "eval_true" / "test.translations.txt").read_text() == \
        (tmp_path / "eval_false" / "test.translations.txt").read_text()


def test_with_a_real_table_every_output_token_is_a_row_of_its_batch(checkpoint, tmp_path):
    build(tmp_path, checkpoint, "task.candidates=2", "task.frequent=3")
    translator = load_translator([checkpoint], BeamSearch(beam_size=3, nbest=3, shortlist=True))
    src = translator.tokenizer.encode_sources(SOURCES)
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in src], batch_first=True, padding_value=0)
    rows = set(translator.shortlist.rows(src).tolist())
    assert 0 < len(rows) < translator.tokenizer.tgt.vocab_size
    outputs = {t for nbest in translator.hypotheses(src) for h in nbest for t in h.tokens}
    assert outputs and outputs <= rows
    assert len(translate(tmp_path, checkpoint, "restricted", "decoding=beam", "decoding.shortlist=true")) == 40


def test_a_damaged_or_foreign_table_is_one_line_naming_it(checkpoint, tmp_path):
    path = checkpoint.with_name("last.shortlist.json")
    args = ["task=translate", f"ckpt_path={checkpoint}", f"task.input={tmp_path}/in.txt", "decoding.shortlist=true",
            f"hydra.run.dir={tmp_path}/run"]
    path.write_text('{"kind": "transformer-mt shortlist", "version": 1, "tab')
    assert_clean_failure(run_py(*args), f"{path}: not a readable lexical table")
    path.write_text(json.dumps({"kind": "transformer-mt shortlist", "version": 1, "vocabularies": "another"}))
    assert_clean_failure(run_py(*args), f"{path}: built for other vocabularies than {checkpoint}'s; build it again: "
                                        f"python run.py task=shortlist ckpt_path={checkpoint}")
