"""The Arrow cache: built once, reused without training or encoding, rebuilt when inputs change;
length filtering on train only; nothing half-written. The loaders: batches padded to a multiple,
the same from worker processes, pinned on CUDA; workers set by the GPU trainer presets."""

import logging
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from tests.helpers import compose_config, schema_refusal
from transformer_mt.data.batching import pin_memory
from transformer_mt.data.corpus import CleanPairs, Corpus, TextFileCorpus
from transformer_mt.data.datamodule import TranslationDataModule
from transformer_mt.data.tokenizer import TokenizerOptions
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import ConfigError, DataError


def write_corpus(folder, n=60):
    folder.mkdir(exist_ok=True)
    for split, count in (("train", n), ("val", 8), ("test", 8)):
        (folder / f"{split}.en").write_text("".join(f"the cat number {i} sat on the mat\n" for i in range(count)))
        (folder / f"{split}.de").write_text("".join(f"die Katze Nummer {i} sass auf der Matte\n" for i in range(count)))


def make_dm(folder, cache, **kwargs):
    options = dict(tokenizer=TokenizerOptions(vocab_size=120, min_frequency=1), cache_dir=str(cache),
                   max_len=64, max_tokens=512)
    options.update(kwargs)
    return TranslationDataModule({"files": TextFileCorpus(str(folder), "en", "de")}, **options)


def test_second_run_neither_trains_nor_encodes(tmp_path, caplog):
    write_corpus(tmp_path / "corpus")
    first = make_dm(tmp_path / "corpus", tmp_path / "cache")
    first.prepare_data()
    first.setup("fit")
    built = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(built) == 1 + 3 and all(not name.startswith(".") for name in built)  # vocab + 3 splits
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="transformer_mt.data.datamodule"):
        second = make_dm(tmp_path / "corpus", tmp_path / "cache")
        second.prepare_data()
        second.setup("fit")
    said = [record.getMessage() for record in caplog.records]
    assert not [line for line in said if line.startswith("training ") or ": encoding " in line], said
    assert {line.split(" cache hit")[0] for line in said if "cache hit" in line} == {
        "vocabularies:", "train: token ids", "val: token ids", "test: token ids"}
    assert second.datasets["train"].table[:]["src_ids"] == first.datasets["train"].table[:]["src_ids"]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == built


def test_changed_file_or_option_rebuilds(tmp_path):
    write_corpus(tmp_path / "corpus")
    make_dm(tmp_path / "corpus", tmp_path / "cache").prepare_data()
    names = lambda: {p.name for p in (tmp_path / "cache").iterdir()}  # noqa: E731
    base = names()
    make_dm(tmp_path / "corpus", tmp_path / "cache", max_len=20).prepare_data()
    assert len(names() - base) == 1  # only the training ids: same vocabulary, val and test
    (tmp_path / "corpus" / "train.de").write_text("".join(f"der Hund {i}\n" for i in range(60)))
    before = names()
    make_dm(tmp_path / "corpus", tmp_path / "cache").prepare_data()
    assert len(names() - before) == 4  # new vocabulary, so every split is encoded again
    before = names()
    make_dm(tmp_path / "corpus", tmp_path / "cache", tokenizer=TokenizerOptions(vocab_size=100)).prepare_data()
    assert len(names() - before) == 4


def test_length_filtering_is_counted_and_train_only(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    write_corpus(tmp_path / "corpus")
    with (tmp_path / "corpus" / "train.en").open("a") as f:
        f.write("word " * 80 + "\n" + "short\n")
    with (tmp_path / "corpus" / "train.de").open("a") as f:
        f.write("Wort\n" + "ein sehr viel laengerer deutscher Satz mit vielen Woertern\n")
    with (tmp_path / "corpus" / "val.en").open("a") as f:
        f.write("word " * 80 + "\n")
    with (tmp_path / "corpus" / "val.de").open("a") as f:
        f.write("Wort\n")
    dm = make_dm(tmp_path / "corpus", tmp_path / "cache", max_len_ratio=3.0)
    dm.prepare_data()
    dm.setup("fit")
    assert len(dm.datasets["train"]) == 60  # the over-long pair and the 1:many pair are gone
    assert "removed 2 of 62 training pairs by length" in caplog.text
    assert len(dm.datasets["val"]) == 9  # never filtered


def test_empty_training_set_after_filtering_is_a_clear_error(tmp_path):
    write_corpus(tmp_path / "corpus")
    with pytest.raises(DataError, match=r"no training pairs left after filtering \(data.max_len=2"):
        make_dm(tmp_path / "corpus", tmp_path / "cache", max_len=2).prepare_data()
    assert not any(p.name.startswith(".") for p in (tmp_path / "cache").iterdir())  # no half-built folder left


def test_encoding_with_worker_processes_equals_one_process(tmp_path):
    corpus = ToyCorpus(num_train=10000, num_val=10, num_test=10)
    options = dict(tokenizer=TokenizerOptions(vocab_size=256), max_tokens=1024)
    one = TranslationDataModule({"toy": corpus}, cache_dir=str(tmp_path / "a"), num_proc=1, **options)
    two = TranslationDataModule({"toy": corpus}, cache_dir=str(tmp_path / "b"), num_proc=2, **options)
    for dm in (one, two):
        dm.prepare_data()
        dm.setup("fit")
    assert one.datasets["train"].table[:]["src_ids"] == two.datasets["train"].table[:]["src_ids"]
    assert one.datasets["train"].table[:]["tgt_ids"] == two.datasets["train"].table[:]["tgt_ids"]


class StreamOnly(Corpus):
    """A corpus that can only be streamed: `load` (the whole split in memory) fails; it records the
    largest chunk it handed out."""

    def __init__(self, folder) -> None:
        self.files = TextFileCorpus(str(folder), "en", "de")
        self.largest_chunk = 0

    def pairs(self, split) -> CleanPairs:
        read = self.files.pairs(split)
        return CleanPairs(self.recorded(read), read.name, filter_empty=False)

    def recorded(self, chunks):
        for src, tgt in chunks:
            self.largest_chunk = max(self.largest_chunk, len(src))
            yield src, tgt

    def load(self, split):
        raise AssertionError(f"the whole {split} split was asked for")

    def fingerprint(self, split):
        return self.files.fingerprint(split)

    def location(self, split, index):
        return self.files.location(split, index)


def test_a_corpus_is_streamed_never_held_whole_and_the_vocabulary_trains_on_a_sample(tmp_path, caplog):
    from transformer_mt.data.corpus import CHUNK

    pairs, sample = 3 * CHUNK // 2, 500
    write_corpus(tmp_path / "corpus", n=pairs)
    corpus = StreamOnly(tmp_path / "corpus")
    with caplog.at_level(logging.INFO, logger="transformer_mt.data.datamodule"):
        dm = TranslationDataModule({"stream": corpus},
                                   TokenizerOptions(vocab_size=120, min_frequency=1, train_sample=sample),
                                   cache_dir=str(tmp_path / "cache"), max_len=64, max_tokens=512)
        dm.prepare_data()
        dm.setup("fit")
    assert f"on {sample} pairs (a sample of {pairs})" in caplog.text
    assert corpus.largest_chunk == CHUNK and len(dm.datasets["train"]) == pairs
    first, last = dm.datasets["train"].table[0], dm.datasets["train"].table[pairs - 1]
    assert first["src_ids"][-1] == last["src_ids"][-1] == dm.vocabularies().special_ids()["eos_id"]
    assert dm.vocabularies().src.decode([last["tgt_ids"]]) == [f"die Katze Nummer {pairs - 1} sass auf der Matte"]


def test_pin_memory_only_when_the_root_device_is_cuda():
    def trainer(device: str) -> SimpleNamespace:  # a stand-in: the one attribute the decision reads
        return SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device(device)))

    assert pin_memory(trainer("cuda:0")) and pin_memory(trainer("cuda"))
    assert not pin_memory(trainer("cpu")) and not pin_memory(trainer("meta")) and not pin_memory(None)


@pytest.mark.parametrize("value", [0, -8, 2.5, "8", None])
def test_pad_to_multiple_must_be_a_positive_integer(tmp_path, value):
    assert schema_refusal(tmp_path, "data.pad_to_multiple", value) == \
        f"data.pad_to_multiple={value!r}: must be an integer >= 1"


def loader_batches(tmp_path, **options) -> list[dict]:
    dm = TranslationDataModule({"toy": ToyCorpus(num_train=600, num_val=10, num_test=10)},
                               TokenizerOptions(vocab_size=256), cache_dir=str(tmp_path / "cache"), max_tokens=300,
                               **options)
    dm.prepare_data()
    dm.setup("fit")
    loader = dm.train_dataloader()
    assert not loader.pin_memory  # no trainer: not on CUDA
    return list(loader)


def test_batches_padded_to_a_multiple_fit_the_budget_and_workers_build_the_same(tmp_path):
    plain, padded = loader_batches(tmp_path), loader_batches(tmp_path, pad_to_multiple=8)
    for batch in padded:
        count, width, length = *batch["src"].shape, batch["tgt_in"].shape[1]
        assert width % 8 == 0 and length % 8 == 0 and count * max(width, length) <= 300
        # no further than the next multiple (pad id 0): the last 8 columns hold the longest sentence's end
        assert (batch["src"][:, width - 8 :] != 0).any() and (batch["tgt_out"][:, length - 8 :] != 0).any()
    assert sum(b["num_tokens"] for b in padded) == sum(b["num_tokens"] for b in plain)  # the same sentences
    assert any(b["src"].shape[1] % 8 for b in plain)  # the toy corpus has other lengths: padding did something
    in_worker = loader_batches(tmp_path, pad_to_multiple=8, num_workers=1)
    assert len(in_worker) == len(padded)
    for a, b in zip(in_worker, padded):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k]
                                            for k in a)


def test_gpu_trainer_presets_add_loader_workers_and_leave_the_trainer_as_it_was(tmp_path):
    def composed(*overrides: str):
        cfg = compose_config(tmp_path, list(overrides))
        return OmegaConf.to_container(cfg.trainer), cfg.data.num_workers, set(cfg)

    default, workers, top = composed()
    assert workers == 0
    for preset in ("cpu", "ddp_cpu"):
        trainer, workers, keys = composed(f"trainer={preset}")
        assert workers == 0 and keys == top
    expected = {"gpu": {"accelerator": "gpu", "devices": 1, "precision": "bf16-mixed"},
                "ddp": {"accelerator": "gpu", "devices": 4, "num_nodes": 1, "strategy": "ddp",
                        "precision": "bf16-mixed"}}
    for preset, changes in expected.items():
        trainer, workers, keys = composed(f"trainer={preset}")
        assert trainer == {**default, **changes}  # the default trainer and the preset's own keys, nothing more
        assert workers == 4 and keys == top  # no trainer key leaked to the top level
        assert composed(f"trainer={preset}", "data.num_workers=0")[1] == 0  # the command line still decides
    assert composed("experiment=paper/wmt14_en_de_big", "trainer=gpu")[1] == 4


def test_sentences_that_fit_only_unpadded_name_pad_to_multiple(tmp_path):
    write_corpus(tmp_path / "corpus")
    dm = make_dm(tmp_path / "corpus", tmp_path / "cache", max_tokens=15)
    dm.check_splits(["train", "val"])  # every pair fits 15 tokens as it is (between 9 and 15)
    padded = make_dm(tmp_path / "corpus", tmp_path / "cache", max_tokens=15, pad_to_multiple=8)
    with pytest.raises(ConfigError, match=r"pairs of 16 tokens, more than the batch budget data.max_tokens=15 "
                                          r"\(lengths padded to a multiple of data.pad_to_multiple=8\)"):
        padded.check_splits(["train", "val"])


def truncate(path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(("damage", "why"), [
    (lambda folder: truncate(folder / "ids.arrow"), "bytes, entry.json records"),  # a full disk, a cut copy
    (lambda folder: (folder / "entry.json").unlink(), "no entry.json"),  # written before records, half copied
    (lambda folder: (folder / "entry.json").write_bytes(b'{"rows": 6'), "entry.json unreadable"),  # garbled
    (lambda folder: (folder / "ids.arrow").write_bytes(b"\0" * (folder / "ids.arrow").stat().st_size),
     "ids.arrow unreadable"),  # the right size, not Arrow
], ids=["truncated-arrow", "no-record", "garbled-record", "zeroed-arrow"])
def test_a_damaged_cache_entry_is_named_and_encoded_again(tmp_path, caplog, damage, why):
    """The same token ids as a fresh build, and a warning naming the entry and what is wrong."""
    write_corpus(tmp_path / "corpus")
    fresh = make_dm(tmp_path / "corpus", tmp_path / "cache")
    fresh.setup("fit")
    expected = {split: fresh.datasets[split].table[:] for split in ("train", "val")}  # read before the damage
    folder = fresh._ids_folder("train")
    fresh.datasets.clear()  # unmapped: the damage below cuts the file under its memory map
    damage(folder)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="transformer_mt.data.datamodule"):
        again = make_dm(tmp_path / "corpus", tmp_path / "cache")
        again.setup("fit")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"train: token ids cache entry {folder} is damaged (" in warnings[0], warnings
    assert why in warnings[0]
    assert f"train: encoding into {folder}" in caplog.text
    assert {split: again.datasets[split].table[:] for split in ("train", "val")} == expected
    assert not any(p.name.startswith(".") for p in (tmp_path / "cache").iterdir())
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="transformer_mt.data.datamodule"):
        make_dm(tmp_path / "corpus", tmp_path / "cache").setup("fit")  # the new entry is whole
    assert "train: token ids cache hit" in caplog.text
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
