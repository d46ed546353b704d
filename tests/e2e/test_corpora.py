"""Several training corpora in one run (data.corpora): each epoch shows every corpus by its weight,
tagged sources start with their tag (one token of the vocabulary, kept in the checkpoint, usable by
task=translate and task=score), the composition is logged, a mid-epoch resume stays bit-identical,
a corpus added to a run with a given vocabulary is the only one encoded, and every corpus's
validation and test splits are scored as named sets, by training and by task=evaluate."""

import json
from collections import Counter

import pytest
import torch
import yaml

from tests.helpers import compose_config, interrupt_at, record_steps, recorded_steps, run_py
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.errors import ConfigError, find_user_error
from transformer_mt.tasks import run

pytestmark = pytest.mark.slow
MAIN = 600  # the toy corpus's training pairs; the copy corpus's 300 come after them in the table
COPY = '+data.corpora.copy={_target_: transformer_mt.data.ToyCorpus, mode: copy, num_train: 300, num_val: 5, ' \
       'num_test: 5, seed: 7, weight: 0.5, tag: copy}'
MIXED = ["data.corpora.toy.num_train=600", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20",
         "data.max_tokens=512", "~callbacks.epoch_checkpoint", "callbacks.last_checkpoint.every_n_steps=4",
         "trainer.max_epochs=2", COPY]


def weights(path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)["state_dict"]


def training_entry(folder):
    """A training split's cache entry (token ids only), or None for another entry."""
    from transformer_mt.data.cache_entry import open_entry
    from transformer_mt.data.encoding import TRAIN_FEATURES

    try:
        return open_entry(folder, TRAIN_FEATURES)
    except ValueError:  # val / test: their texts too
        return None


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """The mixed run, its training batches recorded, and its data cache."""
    root = tmp_path_factory.mktemp("mixed")
    result = run_py(*MIXED, *record_steps(root / "steps.jsonl"), f"hydra.run.dir={root}/whole",
                    f"paths.cache_dir={root}/cache")
    assert result.returncode == 0, result.stderr[-3000:]
    return root


def test_each_epoch_shows_every_toy_pair_once_and_a_different_half_of_the_copy_corpus(mixed):
    per_epoch = [Counter(), Counter()]
    for epoch, _, ids in recorded_steps(mixed / "steps.jsonl"):
        per_epoch[epoch].update(ids)
    halves = []
    for seen in per_epoch:
        assert [seen[i] for i in range(MAIN)] == [1] * MAIN  # weight 1: each pair once
        copies = {i for i in seen if i >= MAIN}
        assert len(copies) == 150 and all(seen[i] == 1 for i in copies) and max(copies) < MAIN + 300
        halves.append(copies)
    assert halves[0] != halves[1]
    log = (mixed / "whole" / "run.log").read_text()
    assert "toy: 600 pairs of 600 (weight 1)" in log and "copy: 150 pairs of 300 (weight 0.5)" in log
    assert "copy (toy/train): removed 0 of 300 training pairs by length" in log
    composition = yaml.safe_load((mixed / "whole" / "csv" / "hparams.yaml").read_text())["epoch_composition"]
    assert {name: (c["pairs"], c["of"], c["weight"]) for name, c in composition.items()} == {
        "toy": (600, 600, 1.0), "copy": (150, 300, 0.5)}
    assert composition["copy"]["tokens"] > 0


def test_tagged_sources_start_with_the_tag_a_token_of_the_checkpoints_vocabulary(mixed, tmp_path):
    checkpoint = mixed / "whole" / "checkpoints" / "last.ckpt"
    vocab = Vocabularies.from_dict(torch.load(checkpoint, weights_only=True)["hyper_parameters"]["tokenizer"])
    [tag] = vocab.source_prefix("copy", "task.tag")
    assert vocab.source_prefix("<copy>", "task.tag") == [tag]
    assert vocab.src.tokens([tag]) == ["<copy>"]
    assert tag not in vocab.src.encode(["<copy> the dog"])[0]  # text that spells the tag is text
    assert vocab.src.decode([[tag, *vocab.src.encode(["the dog"])[0]]]) == ["the dog"]  # dropped when decoding
    train = [training_entry(folder) for folder in (mixed / "cache").glob("ids-*")]
    train = [entry for entry in train if entry is not None]
    assert sorted(len(e) for e in train) == [300, MAIN]
    for entry in train:
        firsts = {row[0] for row in entry["src_ids"]}
        assert (firsts == {tag}) == (len(entry) == 300) and (len(entry) == MAIN) == (tag not in firsts)

    (tmp_path / "pairs.tsv").write_text("the dog sees a cat\tthe dog sees a cat\n")
    scores = {}
    for name, extra in (("plain", []), ("tagged", ["task.tag=copy"])):
        result = run_py("task=score", f"ckpt_path={checkpoint}", f"task.input={tmp_path}/pairs.tsv",
                        f"hydra.run.dir={tmp_path}/{name}", *extra)
        assert result.returncode == 0, result.stderr[-2000:]
        scores[name] = result.stdout
        translated = run_py("task=translate", f"ckpt_path={checkpoint}", f"hydra.run.dir={tmp_path}/t{name}", *extra,
                            input="the dog sees a cat\n")
        assert translated.returncode == 0 and len(translated.stdout.splitlines()) == 1, translated.stderr[-2000:]
    assert scores["plain"] != scores["tagged"]  # the source the model saw differs by the tag
    unknown = run_py("task=translate", f"ckpt_path={checkpoint}", f"hydra.run.dir={tmp_path}/bad", "task.tag=bt",
                     input="the dog\n")
    assert unknown.returncode == 1 and unknown.stderr.strip().splitlines()[-1] == (
        "error: task.tag=bt: the vocabulary has no token <bt> (a vocabulary trained with tagged corpora has their "
        "tags; this one has <copy>)")


def test_a_mixed_run_resumed_mid_epoch_ends_with_the_uninterrupted_weights(mixed, tmp_path):
    with pytest.raises(SystemExit) as stopped:
        run(compose_config(tmp_path / "part", [*MIXED, *interrupt_at(9, "SIGTERM")], cache_dir=mixed / "cache"))
    assert stopped.value.code == 143
    last = tmp_path / "part" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 10  # mid-epoch 0
    run(compose_config(tmp_path / "part", [*MIXED, f"ckpt_path={last}"], cache_dir=mixed / "cache"))
    whole, resumed = weights(mixed / "whole" / "checkpoints" / "last.ckpt"), weights(last)
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)


def test_a_corpus_added_with_a_given_vocabulary_is_the_only_one_encoded(mixed, tmp_path):
    vocabulary = f"data.tokenizer.file={mixed}/whole/tokenizer/src.json"
    common = ["data.corpora.toy.num_train=600", "data.corpora.toy.num_val=20", "data.corpora.toy.num_test=20",
              "trainer.max_steps=1", "trainer.limit_val_batches=0", vocabulary]
    for name, extra in (("one", []), ("two", [COPY])):
        result = run_py(*common, *extra, f"hydra.run.dir={tmp_path}/{name}", f"paths.cache_dir={tmp_path}/cache")
        assert result.returncode == 0, result.stderr[-3000:]
    log = (tmp_path / "two" / "run.log").read_text()
    assert "toy/train: token ids cache hit" in log and "copy/train: encoding into" in log
    assert "toy/train: encoding" not in log


@pytest.mark.parametrize("override, message", [
    ("+data.corpus={_target_: transformer_mt.data.ToyCorpus}",  # the old spelling of the first corpus
     "data.corpus: the corpus is now an entry of data.corpora"),
    ("data.corpora.toy.weight=-1", "data.corpora.toy.weight=-1: must be a number >= 0"),
    ("data.corpora.toy.tag='two words'", "data.corpora.toy.tag='two words': must be one word of letters"),
    ("data.corpora.toy.weight=0", "every corpus has weight 0"),
    ("data.temperature=0", "data.temperature=0: must be a number > 0 or null"),
    ("+data.corpora.bt={data_dir: /nowhere, src_lang: en, tgt_lang: de}",  # no _target_: a dict, not a corpus
     "data.corpora.bt: not a corpus: its node needs a _target_, the corpus class"),
])
def test_a_bad_mix_is_one_line_naming_the_key(tmp_path, override, message):
    with pytest.raises(Exception) as err:  # as run.py sees it: the ConfigError it prints as one line
        run(compose_config(tmp_path / "run", [override, "trainer.max_steps=1"]))
    found = find_user_error(err.value)
    assert isinstance(found, ConfigError) and message in str(found), err.value


def test_a_corpus_of_weight_0_with_nothing_to_score_is_refused_before_training(tmp_path, caplog):
    """A corpus kept for evaluation only whose test file is not there (a typo, say) would be neither
    trained on nor scored: the run stops before training, naming it and why; with its file there, the
    same corpus is scored as a named test set."""
    (tmp_path / "data").mkdir()
    extra = ("+data.corpora.flickr={_target_: transformer_mt.data.TextFileCorpus, data_dir: " f"{tmp_path}/data, "
             "src_lang: en, tgt_lang: de, splits: {test: test2017}, weight: 0}")
    small = ["data.corpora.toy.num_train=300", "data.corpora.toy.num_val=5", "data.corpora.toy.num_test=5",
             "trainer.max_steps=1"]
    with pytest.raises(Exception) as err:
        run(compose_config(tmp_path / "run", [*small, extra]))
    found = find_user_error(err.value)
    assert isinstance(found, ConfigError) and str(found) == (
        "data.corpora.flickr has weight 0 and no split to score (val: data.corpora.flickr.splits has no entry for "
        f"split 'val' (it has ['test']); test: {tmp_path}/data/test2017.en: no such file)")
    assert not (tmp_path / "run" / "checkpoints").exists()
    for lang, line in (("en", "the dog sees a cat"), ("de", "hund miska vidas")):
        (tmp_path / "data" / f"test2017.{lang}").write_text(line + "\n")
    with caplog.at_level("INFO", logger="transformer_mt.data.datamodule"):
        metrics = run(compose_config(tmp_path / "again", [*small, extra]))
    assert 0 <= metrics["test/flickr/bleu"] <= 100 and "val/flickr/bleu" not in metrics
    assert "  flickr: none (weight 0: validation and test only)" in caplog.text  # in the epoch's share block


def test_the_composition_of_a_one_corpus_run_is_its_corpus_once(tmp_path):
    run(compose_config(tmp_path / "run", ["data.corpora.toy.num_train=300", "data.corpora.toy.num_val=5",
                                          "data.corpora.toy.num_test=5", "trainer.max_steps=1",
                                          "trainer.limit_val_batches=0"]))
    hparams = yaml.safe_load((tmp_path / "run" / "csv" / "hparams.yaml").read_text())
    assert {k: v["pairs"] for k, v in hparams["epoch_composition"].items()} == {"toy": 300}
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["steps"] == 1


def test_every_corpus_is_a_named_set_of_validation_and_test_and_evaluate_reproduces_them(mixed, tmp_path):
    run_dir = mixed / "whole"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for split in ("val", "test"):  # the first corpus's keys as with one corpus, the copy corpus's named
        assert {f"{split}/bleu", f"{split}/chrf", f"{split}/copy/bleu", f"{split}/copy/chrf",
                f"{split}/copy/ter", f"{split}/copy/loss"} <= set(metrics)
    assert metrics["test/copy/loss"] != metrics["test/loss"]  # another set, another score
    copy_set = metrics["sets"]["copy"]
    assert len(open(copy_set["translations"]).read().splitlines()) == 5  # the copy corpus's 5 test pairs
    assert len(open(metrics["translations"]).read().splitlines()) == 20
    log = (run_dir / "run.log").read_text()
    assert ("val sets: val/bleu (toy), val/copy/bleu; checkpoints are selected on val/bleu "
            "(callbacks.model_checkpoint.monitor)") in log
    assert "val/copy: BLEU" in log and "test/copy: BLEU" in log
    result = run_py("task=evaluate", f"ckpt_path={metrics['tested_checkpoint']}", f"hydra.run.dir={tmp_path}/eval",
                    f"paths.cache_dir={mixed}/cache")
    assert result.returncode == 0, result.stderr[-3000:]
    evaluated = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    for key in ("test/bleu", "test/chrf", "test/copy/bleu", "test/copy/chrf", "test/copy/ter"):
        assert evaluated[key] == metrics[key], key
    assert open(evaluated["sets"]["copy"]["translations"]).read() == open(copy_set["translations"]).read()


def test_every_set_scores_the_same_under_ddp(mixed, tmp_path):
    """task=evaluate of the mixed run under trainer=ddp_cpu: each set's sentences split over two
    processes, gathered and scored once, as one process scored them in training."""
    metrics = json.loads((mixed / "whole" / "metrics.json").read_text())
    result = run_py("task=evaluate", f"ckpt_path={metrics['tested_checkpoint']}", "trainer=ddp_cpu",
                    f"hydra.run.dir={tmp_path}/ddp", f"paths.cache_dir={mixed}/cache", timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    ddp = json.loads((tmp_path / "ddp" / "metrics.json").read_text())
    for key in ("test/bleu", "test/chrf", "test/ter", "test/copy/bleu", "test/copy/chrf", "test/copy/ter"):
        assert ddp[key] == metrics[key], key  # scored once on the gathered translations: exact
    for key in ("test/loss", "test/copy/loss"):  # fp32 sums of other batches: equal to float rounding
        assert ddp[key] == pytest.approx(metrics[key], rel=1e-5), key
    assert open(ddp["sets"]["copy"]["translations"]).read() == open(metrics["sets"]["copy"]["translations"]).read()
