"""data.corpora, the one way a run names its corpora: each data preset names its own entry, the old
`data.corpus` is refused in one line naming data.corpora, two weighted corpora mix as they did, and
the datamodule's constructor only stores: the data work is prepare_data's and setup's."""

from collections import Counter

import pytest
from hydra.errors import ConfigCompositionException

from tests.helpers import ROOT, compose_config
from transformer_mt.composition import composition_error
from transformer_mt.data.corpus import Corpus, TextFileCorpus
from transformer_mt.data.datamodule import TranslationDataModule
from transformer_mt.data.mixture import OLD_SPELLING, Mixture
from transformer_mt.data.tokenizer import TokenizerOptions
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import ConfigError, DataError, find_user_error
from transformer_mt.tasks import run


class Untouchable(Corpus):
    """A corpus that fails the test if it is read, fingerprinted or located."""

    def pairs(self, split):
        raise AssertionError(f"pairs({split!r}) while constructing")

    def fingerprint(self, split):
        raise AssertionError(f"fingerprint({split!r}) while constructing")

    def location(self, split, index):
        raise AssertionError(f"location({split!r}) while constructing")


def test_the_constructor_reads_no_file_opens_no_corpus_and_makes_no_vocabulary(tmp_path):
    dm = TranslationDataModule({"first": Untouchable(), "second": Untouchable()},
                               TokenizerOptions(file=str(tmp_path / "no-such-tokenizer.json")),
                               cache_dir=str(tmp_path / "cache"), run_dir=str(tmp_path / "run"))
    assert list(dm.corpora) == ["first", "second"] and dm.first == "first" and dm.datasets == {}
    assert not (tmp_path / "cache").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize("make, message", [
    (lambda folder: TextFileCorpus(str(folder / "nowhere"), "en", "de"), "{folder}/nowhere: no such folder"),
    (lambda folder: TextFileCorpus(str(folder), "en", "de", splits={"val": "val"}),
     "data.corpora.files.splits has no entry for split 'train' (it has ['val'])"),
], ids=["no-folder", "no-training-split"])
@pytest.mark.parametrize("work", ["prepare_data", "setup", "vocabularies"])
def test_a_corpus_that_cannot_be_read_is_built_and_then_named_by_the_data_work(tmp_path, make, message, work):
    """Built without a look at its files; prepare_data, setup (and vocabularies(), the build step's)
    then stop at the first file, in one line naming it (its key under data.corpora)."""
    dm = TranslationDataModule({"files": make(tmp_path)}, TokenizerOptions(vocab_size=100),
                               cache_dir=str(tmp_path / "cache"))
    with pytest.raises(DataError) as err:
        getattr(dm, work)()
    said = str(err.value)
    assert said.startswith(message.format(folder=tmp_path)) and "\n" not in said, said
    assert not (tmp_path / "cache").exists()  # nothing cached: the first file stopped it


def test_a_data_config_that_still_says_data_corpus_is_refused_in_one_line(tmp_path):
    """In a composed config (a preset of before, or +data.corpus=): the build step's one line naming
    data.corpora, before any data work; on the command line, Hydra's composition refuses the key and
    the one line names the new one."""
    cfg = compose_config(tmp_path / "run", ["+data.corpus={_target_: transformer_mt.data.ToyCorpus, num_train: 50}",
                                            "trainer.max_steps=1"])
    with pytest.raises(Exception) as err:  # noqa: PT011  (as run.py sees it: the ConfigError it prints)
        run(cfg)
    found = find_user_error(err.value)
    assert isinstance(found, ConfigError) and str(found) == OLD_SPELLING
    assert str(found).startswith("data.corpus: the corpus is now an entry of data.corpora") and "\n" not in str(found)
    assert not (tmp_path / "run" / ".cache").exists()
    overrides = ["data=files", "data.corpus.data_dir=/somewhere"]
    with pytest.raises(ConfigCompositionException) as composing:
        compose_config(tmp_path / "cli", overrides)
    assert composition_error(composing.value, overrides) == (
        "data.corpus.data_dir: no such key (did you mean data.corpora.files.data_dir?)")


def test_every_data_preset_names_its_corpus_under_data_corpora(tmp_path):
    presets = sorted(p.stem for p in (ROOT / "conf" / "data").glob("*.yaml") if p.stem != "checkpoint")
    assert {"toy", "files", "multi30k", "wmt14"} <= set(presets)
    for preset in presets:
        data = compose_config(tmp_path, [f"data={preset}"]).data
        assert "corpus" not in data and list(data.corpora) == [preset], preset
        assert {"_target_", "weight", "tag"} <= set(data.corpora[preset]), preset


def mixed_datamodule(tmp_path) -> TranslationDataModule:
    """The toy corpus (200 pairs) and a tagged copy corpus of weight 0.5 (100 pairs), set up for fit."""
    corpora = {"toy": ToyCorpus(num_train=200, num_val=10, num_test=10),
               "copy": ToyCorpus(mode="copy", num_train=100, num_val=5, num_test=5, seed=7, weight=0.5, tag="copy")}
    dm = TranslationDataModule(corpora, TokenizerOptions(vocab_size=256), cache_dir=str(tmp_path / "cache"),
                               max_tokens=512, seed=3)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_two_corpora_with_weights_mix_as_before(tmp_path):
    dm = mixed_datamodule(tmp_path)
    composition = dm.mixture.composition()
    assert [(name, c["pairs"], c["of"], c["weight"]) for name, c in composition.items()] == [
        ("toy", 200, 200, 1.0), ("copy", 50, 100, 0.5)]
    before = Mixture(["toy", "copy"], [200, 100], [1.0, 0.5], None, 3)  # the rows from (seed, epoch) alone
    for epoch in (0, 1):
        assert dm.mixture.rows(epoch).tolist() == before.rows(epoch).tolist()
    seen = Counter(row for batch in dm.train_dataloader() for row in batch["id"].tolist())
    assert all(seen[row] == 1 for row in range(200))  # weight 1: every pair of the first corpus once
    copies = [row for row in seen if row >= 200]
    assert len(copies) == 50 and all(seen[row] == 1 for row in copies) and max(copies) < 300  # half of the copies
    [tag] = dm.prefix("copy")
    assert dm.prefix("toy") == [] and {dm.datasets["train"].table[row]["src_ids"][0] for row in copies} == {tag}
    # the first entry is the run's own: its validation split is `val`, the other one's is named
    assert dm.keys("val") == ["val", "val/copy"] and (len(dm.datasets["val"]), len(dm.datasets["val/copy"])) == (10, 5)


def test_an_entry_set_to_null_is_left_out_and_anything_but_corpora_by_name_is_one_line():
    copy = ToyCorpus(mode="copy", num_train=20)
    dm = TranslationDataModule({"toy": None, "copy": copy}, TokenizerOptions(), cache_dir="unused")
    assert dm.corpora == {"copy": copy} and dm.first == "copy"
    for corpora, message in (({}, "data.corpora is empty: name a corpus"),
                             ({"toy": None}, "data.corpora is empty: name a corpus"),
                             (copy, "data.corpora: a mapping of names to corpora"),
                             ({"bt": {"data_dir": "x"}}, "data.corpora.bt: not a corpus: its node needs a _target_"),
                             ({"copy": ToyCorpus(weight=-1)}, "data.corpora.copy.weight=-1: must be a number >= 0"),
                             ({"copy": ToyCorpus(weight=0)}, "data.corpora: every corpus has weight 0")):
        with pytest.raises(ConfigError) as err:
            TranslationDataModule(corpora, TokenizerOptions(), cache_dir="unused")
        assert str(err.value).startswith(message) and "\n" not in str(err.value), err.value
