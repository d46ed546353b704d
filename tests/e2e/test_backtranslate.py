"""task=backtranslate, back-translation in one command: the parallel-only baseline and the reverse
model are trained (the reverse one on the corpus turned around), the reverse model samples
translations of the monolingual text chunk by chunk (each what task=translate gives), the forward
model trains on the parallel data and the tagged back-translations and is compared with the
baseline; stopped after a chunk, the same command ends as the uninterrupted pipeline."""

import json
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers import SMALL_RUN, compose_config, run_py, stopped_in_the_third_chunk
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import DataError
from transformer_mt.evaluation.significance import paired_test
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow
PARALLEL = [*SMALL_RUN, "data.max_tokens=512", "~callbacks.epoch_checkpoint"]  # 300 pairs, 1 epoch


def backtranslate(folder: Path, mono: Path, cache: Path):
    return run_py("task=backtranslate", f"task.monolingual={mono}", "task.chunk_lines=200", *PARALLEL,
                  f"hydra.run.dir={folder}", f"paths.cache_dir={cache}")


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """The uninterrupted pipeline on 300 toy pairs and 500 target-side sentences: its folder, the
    monolingual file and the data cache."""
    root = tmp_path_factory.mktemp("backtranslate")
    mono = root / "mono.txt"
    mono.write_text("".join(line + "\n" for line in ToyCorpus(num_train=500, num_val=0, num_test=0, seed=5)
                            .load("train").tgt))
    result = backtranslate(root / "whole", mono, root / "cache")
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "whole", mono, root / "cache"


def test_back_translations_train_the_forward_model_which_is_compared_with_the_baseline(pipeline, tmp_path):
    folder, mono, _ = pipeline
    for stage in ("baseline", "reverse", "synthetic", "forward", "evaluation"):
        assert json.loads((folder / stage / "stage.json").read_text())["done"] is True, stage
    corpus = ToyCorpus(num_train=300, num_val=10, num_test=7).load("train")
    assert (folder / "reverse" / "data" / "train.src").read_text().splitlines() == corpus.src
    reverse_data = yaml.safe_load((folder / "reverse" / "config.yaml").read_text())["data"]["corpora"]["toy"]
    assert (reverse_data["src_lang"], reverse_data["tgt_lang"]) == ("tgt", "src")  # turned around
    assert (folder / "synthetic" / "train.tgt").read_text() == mono.read_text()  # the text, as it was
    chunk = folder / "synthetic" / "chunks" / "00001"
    reverse = json.loads((folder / "reverse" / "metrics.json").read_text())["tested_checkpoint"]
    result = run_py("task=translate", f"ckpt_path={reverse}", "decoding=sample", "decoding.top_p=1.0",
                    f"task.input={chunk}.in", f"hydra.run.dir={tmp_path}/translate")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == Path(f"{chunk}.out").read_text()  # sampled as task=translate samples
    bt = yaml.safe_load((folder / "forward" / "config.yaml").read_text())["data"]["corpora"]["bt"]
    assert (bt["data_dir"], bt["tag"], bt["weight"]) == (str(folder / "synthetic"), "bt", 1.0)
    metrics, base = (json.loads((folder / run / "metrics.json").read_text()) for run in ("forward", "baseline"))
    expected = paired_test(Path(base["translations"]).read_text().splitlines(),
                           Path(metrics["translations"]).read_text().splitlines(),
                           Path(metrics["references"]).read_text().splitlines())
    comparison = json.loads((folder / "evaluation" / "comparison.json").read_text())
    assert (comparison["forward_bleu"], comparison["baseline_bleu"], comparison["p_randomization"]) == \
        (expected.system, expected.baseline, expected.p_randomization)


def test_stopped_after_a_chunk_the_same_command_ends_as_the_uninterrupted_pipeline(pipeline, tmp_path):
    folder, mono, cache = pipeline
    stopped = stopped_in_the_third_chunk(folder, tmp_path / "stopped", ["forward", "evaluation"])
    result = backtranslate(stopped, mono, cache)
    assert result.returncode == 0, result.stderr[-3000:]
    log = (stopped / "run.log").read_text()
    assert "baseline: done" in log and "reverse: done" in log and "2 chunks were done already" in log
    assert (stopped / "synthetic" / "train.src").read_text() == (folder / "synthetic" / "train.src").read_text()
    whole, again = (torch.load(f / "forward" / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
                    for f in (folder, stopped))
    assert all(torch.equal(whole[k], again[k]) for k in whole)


@pytest.mark.parametrize("content, message", [
    (b"", "{path}: no text (task.monolingual: target-side sentences, one per line)"),
    (b"\n \n", "{path}: no text (task.monolingual: target-side sentences, one per line)"),
    (b"ein hund\nzwei\x00katzen\n", "{path}:2: NUL byte (is this a binary file?)"),
    (None, "{path}: is a directory"),
])
def test_monolingual_text_that_cannot_be_back_translated_stops_the_command_before_any_work(tmp_path, content,
                                                                                            message):
    """An empty, blank or binary task.monolingual (or a folder) is found before the baseline and the
    reverse model train, not after them."""
    path = tmp_path / "mono.de"
    path.mkdir() if content is None else path.write_bytes(content)
    with pytest.raises(DataError) as err:
        run(compose_config(tmp_path / "run", ["task=backtranslate", f"task.monolingual={path}", *PARALLEL]))
    assert str(err.value) == message.format(path=path)
    assert not (tmp_path / "run" / "baseline").exists()
