"""TranslationDataModule: corpus -> vocabularies -> token ids cached as Arrow -> token-budget batches.

Cache (under `cache_dir`, shared by runs): `vocab-<key>/` holds the vocabularies, keyed by the
training text and every tokenizer option; `ids-<key>/` holds one encoded split, keyed by the
vocabularies, that split's text and the filtering options. Both are built once, by local rank 0
in `prepare_data`, written to a temporary folder and renamed when complete; a second run finds
them and neither trains a tokenizer nor encodes.
"""

import hashlib
import json
import logging
import warnings
from functools import lru_cache
from pathlib import Path

import datasets
import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from transformer_mt.atomic import atomic_dir
from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset
from transformer_mt.data.corpus import SPLITS, ParallelText
from transformer_mt.data.tokenizer import TokenizerOptions, Vocabularies, build_vocabularies
from transformer_mt.errors import ConfigError, DataError

log = logging.getLogger(__name__)

CACHE_VERSION = "1"
STAGE_SPLITS = {"fit": ["train", "val"], "validate": ["val"], "test": None, "predict": None}  # None: `split`
# our sampler resumes mid-epoch through the datamodule's state (see state_dict below)
warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch ended")


def digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


@lru_cache(maxsize=4)
def _vocab_from_json(serialized: str) -> Vocabularies:
    return Vocabularies.from_dict(json.loads(serialized))


def _encode_batch(batch: dict, vocab_json: str) -> dict:
    """datasets.map worker: token ids and lengths of a batch of pairs."""
    vocab = _vocab_from_json(vocab_json)
    src = vocab.encode_sources(batch["src_text"])
    tgt = vocab.tgt.encode(batch["tgt_text"])
    return {"src_ids": src, "tgt_ids": tgt, "src_len": [len(s) for s in src], "tgt_len": [len(t) for t in tgt]}


class TranslationDataModule(L.LightningDataModule):
    """Serves train / val batches for `fit` and the `split` split (test by default) for `test`.

    corpus: any object with `load(split) -> ParallelText` and `fingerprint(split) -> str`
    (ToyCorpus, TextFileCorpus, TableCorpus, HubCorpus). tokenizer: TokenizerOptions.
    max_len / max_len_ratio filter the training split only (counted); val and test are never
    filtered. run_dir: where a copy of the vocabularies is saved with the run.
    """

    def __init__(self, corpus, tokenizer: TokenizerOptions | dict, cache_dir: str, run_dir: str | None = None,
                 max_tokens: int = 4096, eval_max_tokens: int | None = None, max_len: int = 256,
                 max_len_ratio: float | None = None, split: str = "test", seed: int = 0, num_workers: int = 0,
                 num_proc: int = 1) -> None:
        super().__init__()
        if split not in SPLITS:
            raise ConfigError(f"data.split must be one of {list(SPLITS)}, got {split!r}")
        self.corpus = corpus
        self.options = tokenizer if isinstance(tokenizer, TokenizerOptions) else TokenizerOptions(**tokenizer)
        self.cache_dir, self.run_dir = Path(cache_dir), Path(run_dir) if run_dir else None
        self.max_tokens, self.eval_max_tokens = max_tokens, eval_max_tokens or max_tokens
        self.max_len, self.max_len_ratio, self.split = max_len, max_len_ratio, split
        self.seed, self.num_workers, self.num_proc = seed, num_workers, num_proc
        self._vocab: Vocabularies | None = None
        self._given_vocab = False
        self._keys: dict[str, str] = {}  # cache keys, computed once
        self._corpus_fingerprints: dict[str, str] = {}  # corpus.fingerprint(split): hashes whole files, so once
        self._saved_to_run_dir = False
        self.datasets: dict[str, TranslationDataset] = {}
        self._samplers: dict[str, TokenBudgetBatchSampler] = {}
        self._resume_state: dict | None = None

    # ---------------------------------------------------------------------------- vocabularies
    def set_vocabularies(self, vocab: Vocabularies) -> None:
        """Use these vocabularies (those of a checkpoint) instead of training them. A tokenizer
        file in the config must then be the same vocabulary."""
        if self.options.file:
            from_file = build_vocabularies([], [], self.options)
            if not from_file.same_as(vocab):
                raise DataError(
                    f"data.tokenizer.file={self.options.file}: its vocabulary ({from_file.src.vocab_size} tokens) "
                    f"is not the checkpoint's ({vocab.src.vocab_size} tokens); leave data.tokenizer.file unset "
                    "to use the checkpoint's"
                )
        self._vocab, self._given_vocab = vocab, True
        self._keys.clear()

    def _vocab_key(self) -> str:
        if "vocab" not in self._keys:
            if self._given_vocab:
                self._keys["vocab"] = digest("given", json.dumps(self._vocab.to_dict()))
            else:
                files = [self.options.file, self.options.tgt_file]
                file_digests = [hashlib.sha256(Path(f).read_bytes()).hexdigest() if f and Path(f).is_file() else f
                                for f in files]
                corpus = None if self.options.file else self._corpus_fingerprint("train")
                self._keys["vocab"] = digest(CACHE_VERSION, corpus, self.options.to_dict(), file_digests)
        return self._keys["vocab"]

    def prepare_vocabularies(self) -> Vocabularies:
        """Load the vocabularies from the cache, or make them (local rank 0) and cache them."""
        if self._vocab is not None:
            return self._vocab
        folder = self.cache_dir / f"vocab-{self._vocab_key()}"
        if folder.is_dir():
            log.info("vocabularies: cache hit %s", folder)
        else:
            train = ParallelText([], []) if self.options.file else self.corpus.load("train")
            if not self.options.file:
                log.info("training %s vocabularies (%s, vocab_size=%d) on %d pairs", "a joint" if self.options.joint
                         else "separate", self.options.type, self.options.vocab_size, len(train))
            vocab = build_vocabularies(train.src, train.tgt, self.options)
            with atomic_dir(folder) as tmp:
                vocab.save(tmp)
        self._vocab = Vocabularies.load(folder)
        return self._vocab

    @property
    def vocabularies(self) -> Vocabularies:
        return self.prepare_vocabularies()

    # ---------------------------------------------------------------------------------- data
    def _splits(self, stage: str | None) -> list[str]:
        """The splits a stage reads; without a known stage, all of them."""
        if stage not in STAGE_SPLITS:
            return list(dict.fromkeys(["train", "val", self.split]))
        return STAGE_SPLITS[stage] or [self.split]

    def _ids_folder(self, split: str) -> Path:
        if split not in self._keys:
            filters = (self.max_len, self.max_len_ratio) if split == "train" else None
            self._keys[split] = digest(CACHE_VERSION, self._vocab_key(), self._corpus_fingerprint(split), split,
                                       filters)
        return self.cache_dir / f"ids-{self._keys[split]}"

    def prepare_data(self) -> None:
        """Vocabularies, then the token ids of this stage's splits, built once into the cache."""
        self.prepare_vocabularies()
        for split in self._splits(self.trainer.state.fn if self.trainer is not None else None):
            self._build(split)

    def _build(self, split: str) -> Path:
        """The cache folder of `split`'s token ids, encoded now if it is not there yet."""
        folder = self._ids_folder(split)
        if folder.is_dir():
            log.info("%s: token ids cache hit %s", split, folder)
        else:
            table = self._encode(self.corpus.load(split), train=split == "train")
            with atomic_dir(folder) as tmp:
                table.save_to_disk(str(tmp / "data"))
        return folder

    def check_splits(self, splits: list[str]) -> None:
        """Build (or find) every split a run will read and check that each sentence fits its batch
        budget, so that a bad validation or test line stops the run before training, not after."""
        for split in dict.fromkeys(splits):
            self._load(split)
            sizes = self.datasets[split].sizes()
            budget = self.max_tokens if split == "train" else self.eval_max_tokens
            too_long = np.flatnonzero(sizes > budget)
            if not too_long.size:
                continue
            i = int(too_long[0])
            if split == "train":  # training pairs passed the data.max_len filter
                raise ConfigError(f"data.max_len={self.max_len} keeps training pairs of {sizes[i]} tokens, more than "
                                  f"the batch budget data.max_tokens={budget}: lower data.max_len or raise "
                                  "data.max_tokens")
            raise DataError(f"{self.corpus.location(split, i)}: {sizes[i]} tokens, more than the batch budget "
                            f"data.eval_max_tokens={budget} ({split} sentences are never filtered)")

    def fingerprints(self) -> dict:
        """What the data of this run was: the corpus fingerprint of each split and of the
        vocabularies, recorded in checkpoints so that evaluation and resume can compare."""
        vocab = hashlib.sha256(json.dumps(self.vocabularies.to_dict(), sort_keys=True).encode()).hexdigest()[:20]
        return {"vocabularies": vocab, **{split: self.fingerprint(split) for split in SPLITS}}

    def fingerprint(self, split: str) -> str | None:
        """A digest of the corpus's `split` (None when the corpus has no such split)."""
        try:
            return digest(self._corpus_fingerprint(split))
        except DataError:  # a corpus without this split (e.g. no test files)
            return None

    def _corpus_fingerprint(self, split: str) -> str:
        if split not in self._corpus_fingerprints:
            self._corpus_fingerprints[split] = self.corpus.fingerprint(split)
        return self._corpus_fingerprints[split]

    def _encode(self, text: ParallelText, train: bool) -> datasets.Dataset:
        datasets.disable_progress_bars()
        table = datasets.Dataset.from_dict({"src_text": text.src, "tgt_text": text.tgt})
        num_proc = self.num_proc if self.num_proc > 1 and len(table) >= 10_000 else None
        table = table.map(_encode_batch, batched=True, batch_size=1000, num_proc=num_proc,
                          fn_kwargs={"vocab_json": json.dumps(self.vocabularies.to_dict())})
        if train:
            max_len, ratio = self.max_len, self.max_len_ratio

            def keep(batch: dict) -> list[bool]:
                return [s <= max_len and t + 1 <= max_len and (ratio is None or max(s, t) <= ratio * max(1, min(s, t)))
                        for s, t in zip(batch["src_len"], batch["tgt_len"])]

            before = len(table)
            table = table.filter(keep, batched=True, batch_size=10_000, num_proc=num_proc)
            removed = before - len(table)
            log.info("%s: removed %d of %d training pairs by length (data.max_len=%d, data.max_len_ratio=%s)",
                     text.name, removed, before, max_len, ratio)
            if len(table) == 0:
                raise DataError(f"{text.name}: no training pairs left after filtering "
                                f"(data.max_len={max_len}, data.max_len_ratio={ratio})")
            table = table.remove_columns(["src_text", "tgt_text"])
        return table

    def setup(self, stage: str | None = None) -> None:
        """Every rank: the vocabularies and this stage's splits, memory-mapped from the cache."""
        if self.run_dir is not None and self.trainer is not None and self.trainer.is_global_zero \
                and not self._saved_to_run_dir:
            self.vocabularies.save(self.run_dir / "tokenizer")
            self._saved_to_run_dir = True
        for split in self._splits(stage):
            self._load(split)

    def _load(self, split: str) -> None:
        """`split`'s token ids, memory-mapped from the cache (built first if missing)."""
        if split not in self.datasets:
            folder = self._build(split)
            self.datasets[split] = TranslationDataset(datasets.load_from_disk(str(folder / "data")))

    # ------------------------------------------------------------------------------- loaders
    def _loader(self, split: str, train: bool) -> DataLoader:
        if split not in self.datasets:
            self.setup({"train": "fit", "val": "validate"}.get(split, "test"))
        dataset = self.datasets[split]
        trainer = self.trainer
        sampler = TokenBudgetBatchSampler(
            dataset.sizes(), self.max_tokens if train else self.eval_max_tokens, shuffle=train, seed=self.seed,
            num_replicas=trainer.world_size if trainer else 1, rank=trainer.global_rank if trainer else 0,
            even=train,
        )
        if train:
            if self._resume_state is not None:
                sampler.load_state_dict(self._resume_state)
                self._resume_state = None
            log.info("train: %d batches per epoch and process, %.1f%% padding (data.max_tokens=%d)",
                     len(sampler), 100 * sampler.padding_fraction(), self.max_tokens)
        self._samplers[split] = sampler
        ids = self.vocabularies.special_ids()
        collate = Collator(ids["pad_id"], ids["bos_id"], ids["eos_id"])
        # its own generator: creating an iterator never draws from the global RNG (exact resume)
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=self.num_workers,
                          persistent_workers=self.num_workers > 0, generator=generator)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", train=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.split, train=False)

    # --------------------------------------------------------------------- mid-epoch resume
    def state_dict(self) -> dict:
        """The training sampler's place: batches of the current epoch the loop has finished
        (the loader runs ahead by its prefetch, so the loop's count is the one that matters)."""
        sampler = self._samplers.get("train")
        if sampler is None or self.trainer is None:
            return {}
        done = self.trainer.fit_loop.epoch_loop.batch_progress.current.processed
        return {"train_sampler": sampler.state_dict(consumed=done)}

    def load_state_dict(self, state: dict) -> None:
        self._resume_state = state.get("train_sampler")
