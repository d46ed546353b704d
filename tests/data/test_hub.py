"""HubCorpus: the real `datasets` loading code on datasets saved locally, and offline failure."""

import time

import datasets
import pytest

from transformer_mt.data.hub import HubCorpus
from transformer_mt.errors import DataError


def translation_dict() -> datasets.DatasetDict:
    def split(n, offset=0):
        return datasets.Dataset.from_dict({"translation": [
            {"de": f"Satz {i} ist  hier", "en": f"sentence {i} is here"} for i in range(offset, offset + n)
        ]})
    return datasets.DatasetDict({"train": split(20), "validation": split(5, 100), "test": split(4, 200)})


def test_save_to_disk_folder_with_a_translation_column(tmp_path):
    translation_dict().save_to_disk(str(tmp_path / "saved"))
    corpus = HubCorpus(str(tmp_path / "saved"), src_lang="de", tgt_lang="en")
    train = corpus.load("train")
    assert len(train) == 20 and train.src[3] == "Satz 3 ist hier" and train.tgt[3] == "sentence 3 is here"
    assert corpus.load("val").src[0] == "Satz 100 ist hier"
    assert corpus.fingerprint("test") == HubCorpus(str(tmp_path / "saved"), "de", "en").fingerprint("test")


def test_data_files_folder_is_loaded_with_load_dataset_and_columns(tmp_path):
    folder = tmp_path / "files"
    folder.mkdir()
    for name, n in (("train", 6), ("validation", 2), ("test", 3)):
        datasets.Dataset.from_dict({"src": [f"s{i}" for i in range(n)], "tgt": [f"t{i}" for i in range(n)]}) \
            .to_parquet(str(folder / f"{name}-00000-of-00001.parquet"))
    corpus = HubCorpus(str(folder), src_lang="x", tgt_lang="y", src_column="src", tgt_column="tgt")
    assert corpus.load("test").src == ["s0", "s1", "s2"]
    assert corpus.load("train").tgt[-1] == "t5"


def test_missing_language_or_split_is_a_clear_error(tmp_path):
    translation_dict().save_to_disk(str(tmp_path / "saved"))
    with pytest.raises(DataError, match="has no language 'fr'"):
        HubCorpus(str(tmp_path / "saved"), src_lang="de", tgt_lang="fr").load("train")
    with pytest.raises(DataError, match="no split 'dev'"):
        HubCorpus(str(tmp_path / "saved"), "de", "en", splits={"val": "dev"}).load("val")


def test_offline_hub_name_fails_fast_and_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(DataError) as err:
        HubCorpus("wmt14", name="de-en", src_lang="en", tgt_lang="de", cache_dir=str(tmp_path)).load("train")
    assert time.perf_counter() - start < 30
    message = str(err.value)
    assert message.startswith("data.corpora.NAME.path=wmt14: the Hugging Face hub cannot be reached")
    assert "save_to_disk" in message and "data=files" in message
