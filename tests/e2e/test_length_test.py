"""task=lengths over a real two-row sweep (`python run.py -m model.positional=sinusoidal,rotary`):
every finished job translates the test set joined 1, 2 and 3 at a time with the checkpoint it tested;
x1 is exactly its test translations and BLEU, every group's BLEU is sacreBLEU's on the files it
writes, the rotary row's differences are against the sinusoidal base; bad keys refused in one line."""

import csv
import json

import pytest
from sacrebleu.metrics import BLEU

from tests.helpers import compose_config, run_py
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import ConfigError
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow
# the toy copy task learnt in 160 steps (test BLEU ~70 here): the scores compared below are not zeros
TINY = ["data.corpora.toy.mode=copy", "data.corpora.toy.num_train=2000", "data.corpora.toy.num_val=10",
        "data.corpora.toy.num_test=61", "trainer.max_epochs=8", "optim.scheduler.warmup_steps=200",
        "~callbacks.epoch_checkpoint"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lengths")
    result = run_py("-m", "model.positional=sinusoidal,rotary", "seed=5", f"hydra.sweep.dir={folder}/sweep",
                    f"paths.cache_dir={folder}/cache", *TINY)
    assert result.returncode == 0, result.stderr[-3000:]
    test = ToyCorpus("copy", num_train=2000, num_val=10, num_test=61).pairs("test").collect()
    (folder / "test.src").write_text("".join(line + "\n" for line in test.src))
    (folder / "test.ref").write_text("".join(line + "\n" for line in test.tgt))
    return folder


def lengths(folder, *extra):
    return run(compose_config(folder / "lengths_run", ["task=lengths", f"task.sweep_dir={folder}/sweep",
                                                       f"task.source={folder}/test.src",
                                                       f"task.reference={folder}/test.ref", *extra]))


def test_each_job_translates_the_joined_sets_and_each_group_is_scored_on_its_segments(sweep):
    result = lengths(sweep, "task.buckets=[10,20]")
    assert result["jobs"] == 2 and result["segments"] == 61 + 31 + 21
    out = sweep / "sweep" / "lengths"
    rows = list(csv.reader((out / "segments.tsv").open(), delimiter="\t"))[1:]
    sources = (sweep / "test.src").read_text().splitlines()
    assert rows[61 + 2][:2] == ["2", "5"] and rows[61 + 2][4] == f"{sources[4]} {sources[5]}"  # the third pair
    assert rows[-1][:2] == ["3", "61"] and rows[-1][4] == sources[60]  # the last triple: line 61 alone
    bleu = BLEU(tokenize="13a", smooth_method="none")
    for job in (0, 1):
        metrics = json.loads((sweep / "sweep" / str(job) / "metrics.json").read_text())
        texts = (out / f"{job}.translations.txt").read_text().splitlines()
        assert texts[:61] == (sweep / "sweep" / str(job) / "test.translations.txt").read_text().splitlines()
        scores = result["scores"][job]
        # the same translations; the run's BLEU is torchmetrics' (float32 sums), this sacreBLEU's (float64)
        assert scores["x1"] == pytest.approx(metrics["test/bleu"], rel=1e-6)
        for name in ("x2", "x3", "1-10", "11-20", "21+"):
            picked = [i for i, row in enumerate(rows) if (row[0] == name[1:]) if name.startswith("x")] or [
                i for i, row in enumerate(rows) if row[3] == name]
            assert scores[name] == bleu.corpus_score([texts[i] for i in picked], [[rows[i][5] for i in picked]]).score
        assert scores["x1"] > 20  # a model that translates: the checks above compare more than zeros
    table = list(csv.DictReader((sweep / "sweep" / "lengths.csv").open()))
    assert [line["model.positional"] for line in table] == ["sinusoidal", "rotary"]
    base, rotary = result["scores"][0]["x3"], result["scores"][1]["x3"]
    assert table[1]["x3 (n=21)"].startswith(f"{rotary:.2f} ({rotary - base:+.2f}")
    assert (sweep / "sweep" / "lengths.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "- row 1 (model.positional=rotary): " in (sweep / "sweep" / "lengths.md").read_text()


def test_bad_joins_and_buckets_and_missing_files_are_refused_in_one_line(sweep):
    """(Unaligned files: tests/e2e/test_quick_refusals.py, refused before torch is imported.)"""
    with pytest.raises(ConfigError, match=r"^task\.joins=\[2, 1\]: must be a list of increasing integers >= 1$"):
        lengths(sweep, "task.joins=[2,1]")
    with pytest.raises(ConfigError, match=r"^task\.buckets=\[0\]: must be a list of increasing integers >= 1"):
        lengths(sweep, "task.buckets=[0]")
    with pytest.raises(ConfigError, match=r"^task\.reference, task\.source have no value"):
        run(compose_config(sweep / "bad_run", ["task=lengths", f"task.sweep_dir={sweep}/sweep"]))
