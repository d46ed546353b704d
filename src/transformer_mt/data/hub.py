"""Parallel corpora from the Hugging Face hub (or a dataset `datasets` saved locally).

Online, `path` is a hub dataset name (wmt14, iwslt2017, ...) loaded with `datasets.load_dataset`
and cached by `datasets`. A local folder works the same way: one written by `save_to_disk` is
read with `load_from_disk`, any other (parquet / json / csv files) with `load_dataset`. Offline,
a hub name is read from the `datasets` cache if it is there, and fails at once otherwise.
"""

import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from transformer_mt.data.corpus import CHUNK, CORPUS_KEY, Chunk, CleanPairs, Corpus, split_name
from transformer_mt.errors import DataError

log = logging.getLogger(__name__)


def hub_reachable(timeout: float = 3.0) -> bool:
    """False in offline mode (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE) or when huggingface.co cannot be reached."""
    for variable in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(variable, "").upper() in ("1", "ON", "YES", "TRUE"):
            return False
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


class HubCorpus(Corpus):
    """A translation dataset with a `translation` column of {lang: text} dicts (wmt14, iwslt2017),
    or two text columns (`src_column`, `tgt_column`). `splits` maps train / val / test to the
    dataset's split names."""

    def __init__(self, path: str, src_lang: str, tgt_lang: str, name: str | None = None,
                 splits: dict[str, str] | None = None, translation_column: str | None = "translation",
                 src_column: str | None = None, tgt_column: str | None = None, revision: str | None = None,
                 cache_dir: str | None = None, weight: float = 1.0, tag: str | None = None,
                 target_tag: str | None = None) -> None:
        self.weight, self.tag, self.target_tag = weight, tag, target_tag
        self.path, self.name, self.revision, self.cache_dir = path, name, revision, cache_dir
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.splits = dict(splits or {"train": "train", "val": "validation", "test": "test"})
        self.translation_column, self.src_column, self.tgt_column = translation_column, src_column, tgt_column
        self._cache: dict = {}

    def dataset(self, split: str):
        """The `datasets.Dataset` of one split."""
        name = split_name(self.splits, split)
        if name not in self._cache:
            self._cache[name] = self._load(name)
        return self._cache[name]

    def _load(self, hub_split: str):
        import datasets

        local = Path(self.path)
        try:
            if (local / "dataset_dict.json").is_file():
                saved = datasets.load_from_disk(str(local))
                if hub_split not in saved:
                    raise DataError(f"{local}: no split {hub_split!r} (it has {sorted(saved)}); "
                                    f"set {CORPUS_KEY}.splits")
                return saved[hub_split]
            if (local / "state.json").is_file():
                return datasets.load_from_disk(str(local))
            if local.is_dir():
                return datasets.load_dataset(str(local), self.name, split=hub_split, cache_dir=self.cache_dir)
            if not hub_reachable():
                return self._load_offline(hub_split)
            return datasets.load_dataset(self.path, self.name, split=hub_split, revision=self.revision,
                                         cache_dir=self.cache_dir)
        except DataError:
            raise
        except (ValueError, KeyError, FileNotFoundError) as err:
            raise DataError(f"{CORPUS_KEY}.path={self.path}: {err}") from None

    def _load_offline(self, hub_split: str):
        """The `datasets` cache only: a clear error, at once, when the dataset is not there."""
        import datasets

        previous = datasets.config.HF_HUB_OFFLINE
        datasets.config.HF_HUB_OFFLINE = True
        try:
            return datasets.load_dataset(self.path, self.name, split=hub_split, revision=self.revision,
                                         cache_dir=self.cache_dir)
        except Exception:
            config = f", {self.name!r}" if self.name else ""
            raise DataError(
                f"{CORPUS_KEY}.path={self.path}: the Hugging Face hub cannot be reached and the dataset is not in "
                f"the local cache. On a machine with internet run: python -c \"import datasets; "
                f"datasets.load_dataset('{self.path}'{config}).save_to_disk('DIR')\", copy DIR here and set "
                f"{CORPUS_KEY}.path=DIR; or use text files: data=files data.corpora.files.data_dir=DIR"
            ) from None
        finally:
            datasets.config.HF_HUB_OFFLINE = previous

    def pairs(self, split: str) -> CleanPairs:
        ds = self.dataset(split)
        name = split_name(self.splits, split)
        return CleanPairs(self._chunks(ds), f"{self.path}/{name}", filter_empty=split == "train",
                          where=f"{self.path} split {name}", size=lambda: len(ds))


    def _chunks(self, ds) -> Iterator[Chunk]:
        """The split's (source, target) sentences, CHUNK rows at a time from the memory-mapped table."""
        if self.src_column and self.tgt_column:
            for column in (self.src_column, self.tgt_column):
                if column not in ds.column_names:
                    raise DataError(f"{CORPUS_KEY}.src_column / tgt_column: {self.path} has no column {column!r} "
                                    f"(it has {ds.column_names})")
            for start in range(0, len(ds), CHUNK):
                rows = ds[start : start + CHUNK]
                yield rows[self.src_column], rows[self.tgt_column]
            return
        column = self.translation_column
        if column not in ds.column_names:
            raise DataError(f"{CORPUS_KEY}.translation_column: {self.path} has no column {column!r} "
                            f"(it has {ds.column_names}); or set {CORPUS_KEY}.src_column and tgt_column")
        for start in range(0, len(ds), CHUNK):
            pairs = ds[start : start + CHUNK][column]
            for lang in (self.src_lang, self.tgt_lang):
                if pairs and lang not in pairs[0]:
                    raise DataError(f"{CORPUS_KEY}.src_lang / tgt_lang: {self.path} has no language {lang!r} "
                                    f"(it has {sorted(pairs[0])})")
            yield [p[self.src_lang] for p in pairs], [p[self.tgt_lang] for p in pairs]

    def fingerprint(self, split: str) -> str:
        ds = self.dataset(split)
        return (f"hub:{ds._fingerprint}:{self.translation_column}:{self.src_column}:{self.tgt_column}:"
                f"{self.src_lang}:{self.tgt_lang}")

    def location(self, split: str, index: int) -> str:
        """Where pair `index` (from 0) of an unfiltered split comes from: PATH split NAME row INDEX."""
        return f"{self.path} split {split_name(self.splits, split)} row {index}"
