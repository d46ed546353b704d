"""TranslationDataModule: corpora -> vocabularies -> token ids cached as Arrow -> token-budget batches.

Built, it holds its options and nothing more, as lightning-hydra-template's datamodule does: each
value is checked (a mistake is one line naming its key), but no file is read, no corpus opened and
no vocabulary made. The data work is Lightning's two hooks: `prepare_data`, once a machine (the
vocabularies made, or found in the cache, and the stage's splits encoded into it), and
`setup(stage)`, in every process (the vocabularies read, the stage's splits memory-mapped). A caller
that needs the vocabularies before training (the build step sizes the model by them) calls
`vocabularies()`, which settles them on its first call; `check_splits` and `token_ids` build (or
find) the splits they read.

The corpora are `data.corpora`, by name, in their order; a data preset names its own
(data=toy: data.corpora.toy). Every one of weight > 0 is trained on (data/mixture.py). The first is
the run's own corpus: its validation and test splits are scored under the plain metric names
(val/bleu, test/bleu) and are what task=evaluate scores and the pipelines (distill, backtranslate)
read; every other corpus with a non-empty split is scored too, under its name (val/NAME/bleu).

Cache (under `cache_dir`, shared by runs): `vocab-<key>/` holds trained vocabularies, keyed by the
training text and every tokenizer option; `ids-<key>/` holds one encoded split, keyed by the
vocabularies, that split's text and the filtering options, with a record of its size and row count
(cache_entry.py). Both are written to a temporary folder and renamed when complete, so a second run
finds them and neither trains nor encodes. A damaged ids entry is encoded again, with a warning.
"""

import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path

import datasets
import lightning as L
import torch
from torch.utils.data import DataLoader

from transformer_mt.atomic import atomic_dir
from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset, pin_memory
from transformer_mt.data.cache_entry import ARROW, digest, discard, open_entry, write_record
from transformer_mt.data.corpus import SPLITS, CleanPairs, Corpus, ParallelText
from transformer_mt.data.dropout import EpochDropout, dropout_note
from transformer_mt.data.encoding import EVAL_FEATURES, TRAIN_FEATURES, encode_split
from transformer_mt.data.fingerprints import CorpusFingerprints
from transformer_mt.data.fits import check_fits
from transformer_mt.data.mixture import Mixture, checked_corpora, corpus_key, corpus_tokens, naming, training_sample
from transformer_mt.data.tokenizer import TokenizerOptions, Vocabularies, tag_token
from transformer_mt.data.vocabulary_training import cached_vocabularies, check_file_matches
from transformer_mt.errors import ConfigError, DataError

log = logging.getLogger(__name__)

CACHE_VERSION = "3"  # 2: one ids.arrow per split, written as it is encoded; 3: text spelling a tag is text
STAGE_SPLITS = {"fit": ["train", "val"], "validate": ["val"], "test": None, "predict": None}  # None: `split`


class TranslationDataModule(L.LightningDataModule):
    """Serves train / val batches for `fit` and the `split` split (test by default) for `test`.

    corpora: name -> corpus (data.corpora; ToyCorpus, TextFileCorpus, TableCorpus, HubCorpus: a
    Corpus, with its `weight` and `tag`), the first the run's own (the module's docstring).
    tokenizer: how the vocabularies are made (TokenizerOptions). vocabularies: the run's, when it
    starts from a checkpoint or a Marian folder (a `tokenizer.file` must then hold the same ones);
    None: made from `tokenizer`. max_len / max_len_ratio filter the training split only (counted);
    val and test are never filtered. run_dir: where a copy of the vocabularies is saved with the
    run. pad_to_multiple: the padded lengths of every batch are multiples of it (the batch budget
    counts them so). packed: training batches are packed streams with no padding (the Collator's
    packed=True; the same batches; validation and test stay padded). shape_grid: K, training batches
    of at most K shapes (data/shape_grid.py). progress: bars on stderr while the corpus is read, the
    tokenizer trained and the splits encoded (null: when stderr is a terminal).
    """

    def __init__(self, corpora: Mapping[str, Corpus | None], tokenizer: TokenizerOptions | dict, cache_dir: str,
                 run_dir: str | None = None, max_tokens: int = 4096, eval_max_tokens: int | None = None,
                 max_len: int = 256, max_len_ratio: float | None = None, split: str = "test", seed: int = 0,
                 num_workers: int = 0, num_proc: int = 1, pad_to_multiple: int = 1,
                 vocabularies: Vocabularies | None = None, progress: bool | None = None, packed: bool = False,
                 temperature: float | None = None, shape_grid: int | None = None) -> None:
        super().__init__()
        self.corpora = checked_corpora(corpora)
        self.first = next(iter(self.corpora))  # the run's own corpus: validation and test
        self.training = [name for name, corpus in self.corpora.items() if corpus.weight > 0]
        self.options = tokenizer if isinstance(tokenizer, TokenizerOptions) else TokenizerOptions(**tokenizer)
        self.cache_dir, self.run_dir = Path(cache_dir), Path(run_dir) if run_dir else None
        self.max_tokens, self.eval_max_tokens = max_tokens, eval_max_tokens or max_tokens
        self.max_len, self.max_len_ratio, self.split = max_len, max_len_ratio, split
        self.seed, self.num_workers, self.num_proc = seed, num_workers, num_proc
        self.pad_to_multiple, self.progress, self.packed = pad_to_multiple, progress, packed
        self.temperature = temperature
        self.shape_grid = shape_grid
        self.given_vocabularies = vocabularies
        # what the data work settles, each once
        self._settled: tuple[Vocabularies, str] | None = None  # the vocabularies and their cache key
        self.corpus_fingerprints = CorpusFingerprints(self.corpora, self.training, temperature)  # each once
        self._eval_sets: dict[str, list[str]] = {}  # split -> the corpora scored on it (eval_sets)
        self._train_counts: list[int] = []  # the pairs of each training corpus, once the training split is built
        self.mixture: Mixture | None = None  # the epochs' composition, once the training split is loaded
        self.datasets: dict[str, TranslationDataset] = {}
        self._samplers: dict[str, TokenBudgetBatchSampler] = {}
        self._resume_state: dict | None = None
        self._handed: tuple[int, int] = (-1, 0)  # (epoch, training batches of it handed to the loop)
        self._saved_to_run_dir = False

    # ---------------------------------------------------------------------------- vocabularies
    def vocabularies(self) -> Vocabularies:
        """The run's vocabularies, settled on the first call: the given ones (checked against
        data.tokenizer.file), else those of data.tokenizer from the cache, made first when they are
        not there (read from its file, or trained on the training splits)."""
        return self._settle()[0]

    def _settle(self) -> tuple[Vocabularies, str]:
        """The vocabularies and their cache key (part of every ids entry's), settled once."""
        if self._settled is None:
            given = self.given_vocabularies
            if given is None:
                key = self._options_key()
                self._settled = self._made_vocabularies(key), key
            else:
                check_file_matches(self.options, given)
                self._settled = given, digest("given", json.dumps(given.to_dict()))
        return self._settled

    def _options_key(self) -> str:
        """The cache key of vocabularies made from the options: the files' or the training text's digest."""
        files = [self.options.file, self.options.tgt_file]
        file_digests = [hashlib.sha256(Path(f).read_bytes()).hexdigest() if f and Path(f).is_file() else f
                        for f in files]
        corpus = None if self.options.file else self.corpus_fingerprints.content("train")
        options = {k: v for k, v in self.options.to_dict().items() if k != "dropout"}  # ids stay deterministic
        tags = [] if self.options.file else self.tags()  # a given vocabulary is what it is
        target_tags = [] if self.options.file else self.tags("target_tag")
        return digest(CACHE_VERSION, corpus, options, file_digests, *([tags] if tags else []),
                      *([["target", *target_tags]] if target_tags else []))

    def tags(self, field: str = "tag") -> list[str]:
        """The tokens the corpora put before their sources (`field` target_tag: their targets), each
        once, which the vocabulary keeps whole."""
        return list(dict.fromkeys(tag_token(getattr(corpus, field), "") for corpus in self.corpora.values()
                                  if getattr(corpus, field)))

    def _made_vocabularies(self, key: str) -> Vocabularies:
        """The vocabularies of `tokenizer` (cache key `key`): from the cache, or made (trained, or read
        from the file) and cached."""
        folder = self.cache_dir / f"vocab-{key}"
        if folder.is_dir():
            log.info("vocabularies: cache hit %s", folder)
        return cached_vocabularies(folder, self.options, self._training_sample, self.tags(), self.progress,
                                   self.tags("target_tag"))

    def _training_sample(self) -> ParallelText:
        """What the vocabulary is trained on: one pass over each training split (every line checked, a
        seeded sample kept), the corpora by their share of an epoch (mixture.training_sample)."""
        train, seen = training_sample((self._pairs(name, "train") for name in self.training),
                                      [self.corpora[name].weight for name in self.training],
                                      self.options.train_sample, self.progress)
        sampled = f" (a sample of {seen})" if len(train) != seen or len(self.training) > 1 else ""
        log.info("training %s (%s, vocab_size=%d) on %d pairs%s", "a joint vocabulary" if self.options.joint
                 else "separate vocabularies", self.options.type, self.options.vocab_size, len(train), sampled)
        return train

    # ---------------------------------------------------------------------------------- data
    def _splits(self, stage: str | None) -> list[str]:
        """The splits a stage reads; without a known stage, all of them."""
        if stage not in STAGE_SPLITS:
            return list(dict.fromkeys(["train", "val", self.split]))
        return STAGE_SPLITS[stage] or [self.split]

    def _ids_folder(self, split: str, name: str | None = None) -> Path:
        """The cache entry of corpus `name`'s (default: the first's) `split` (its tag, when it has
        one, is part of the key)."""
        name = name or self.first
        filters = (self.max_len, self.max_len_ratio) if split == "train" else None
        corpus = self.corpora[name]
        tag = [corpus.tag] if corpus.tag else []
        tag += [f"target:{corpus.target_tag}"] if corpus.target_tag else []
        key = digest(CACHE_VERSION, self._settle()[1], self.corpus_fingerprints.of(name, split), split, filters, *tag)
        return self.cache_dir / f"ids-{key}"

    def _pairs(self, name: str, split: str) -> CleanPairs:
        """Corpus `name`'s `split` as a stream, named in the log (and errors) when there are several."""
        with naming(name):
            pairs = self.corpora[name].pairs(split)
        if len(self.corpora) > 1:
            pairs.name = f"{name} ({pairs.name})"
        return pairs

    def prefix(self, name: str) -> list[int]:
        """The ids corpus `name` puts before each source: its tag's, or none."""
        return self.vocabularies().source_prefix(self.corpora[name].tag, f"{corpus_key(name)}.tag")

    def target_prefix(self, name: str) -> list[int]:
        """The ids corpus `name` puts before each target, which decoding forces: its target_tag's, or none."""
        return self.vocabularies().target_prefix(self.corpora[name].target_tag, f"{corpus_key(name)}.target_tag")

    def prepare_data(self) -> None:
        """Once a machine (Lightning calls it on local rank 0): the vocabularies made into the cache (or
        found there), then the token ids of this stage's splits (all of them outside a trainer)."""
        self.vocabularies()
        for split in self._splits(self.trainer.state.fn if self.trainer is not None else None):
            self._build(split)

    def _build(self, split: str) -> datasets.Dataset:
        """`split`'s token ids: for training, every training corpus's, end to end (their counts in
        `self._train_counts`); else the first corpus's."""
        if split != "train":
            return self._entry(self.first, split)
        tables = [self._entry(name, split) for name in self.training]
        self._train_counts = [len(table) for table in tables]
        return tables[0] if len(tables) == 1 else datasets.concatenate_datasets(tables)

    def _entry(self, name: str, split: str) -> datasets.Dataset:
        """Corpus `name`'s `split` as token ids from the cache, encoded now if they are not there yet
        or their entry is damaged (then a warning names it)."""
        folder = self._ids_folder(split, name)
        label = split if len(self.corpora) == 1 else f"{name}/{split}"
        features = TRAIN_FEATURES if split == "train" else EVAL_FEATURES
        if folder.is_dir():
            try:
                dataset = open_entry(folder, features)
                log.info("%s: token ids cache hit %s", label, folder)
                return dataset
            except ValueError as damage:
                log.warning("%s: token ids cache entry %s is damaged (%s): encoding it again", label, folder, damage)
                discard(folder)
        log.info("%s: encoding into %s", label, folder)
        with atomic_dir(folder) as tmp:
            rows = encode_split(self._pairs(name, split), tmp / ARROW, self.vocabularies(), split == "train",
                                self.max_len, self.max_len_ratio, self.num_proc, self.progress, self.prefix(name),
                                self.target_prefix(name))
            write_record(tmp, rows)
        return open_entry(folder, features)

    def token_ids(self, split: str) -> datasets.Dataset:
        """`split`'s token ids (src_ids ending in EOS, tgt_ids), memory-mapped from the cache, encoded
        now if they are not there yet; train: every training corpus's, end to end (task=shortlist counts
        them)."""
        return self._build(split)

    def check_splits(self, splits: list[str], max_positions: int | None = None) -> None:
        """Build (or find) every split a run will read and check that each sentence fits its batch
        budget and, with `max_positions` (model.max_positions), the model, so that a bad validation or
        test line stops the run before training, not after. (Training pairs fit the model when
        data.max_len does: tasks/runs/config_checks.py checks that before any data work.)"""
        for key in (key for split in dict.fromkeys(splits) for key in self.keys(split)):
            self._load(key)
            split, _, name = key.partition("/")
            budget = self.max_tokens if split == "train" else self.eval_max_tokens
            check_fits(self.corpora[name or self.first], split, self.datasets[key].sizes(), budget,
                       self.pad_to_multiple, self.max_len, max_positions)

    def eval_sets(self, split: str) -> list[str]:
        """The corpora a validation or test `split` scores, by name: the first corpus (its metrics keep
        their plain names, val/bleu), then every other one that has a non-empty `split` (its metrics
        are named, val/NAME/bleu). A corpus without the split (no such file, no entry in its splits)
        is said in the log once."""
        if split not in self._eval_sets:
            first, *others = self.corpora
            self._eval_sets[split] = [first, *(name for name in others if self._has_split(name, split))]
        return self._eval_sets[split]

    def keys(self, split: str) -> list[str]:
        """The datasets of `split`: `train`; or the first corpus's `split` and `split/NAME` for every
        other corpus scored on it (eval_sets)."""
        if split == "train":
            return ["train"]
        return [split, *(f"{split}/{name}" for name in self.eval_sets(split)[1:])]

    def _has_split(self, name: str, split: str) -> bool:
        """Whether corpus `name` has `split` to score. A corpus of weight 0 with neither a validation
        nor a test split is a ConfigError: nothing to train on or score (a typo in its splits, say)."""
        missing = {each: self._missing(name, each) for each in ("val", "test")}
        if self.corpora[name].weight == 0 and all(missing.values()):
            raise ConfigError(f"{corpus_key(name)} has weight 0 and no split to score (val: {missing['val']}; "
                              f"test: {missing['test']})")
        if missing[split]:
            log.info("%s/%s is not scored: %s", name, split, missing[split])
        return not missing[split] and len(self._entry(name, split)) > 0

    def _missing(self, name: str, split: str) -> DataError | None:
        """Why corpus `name` has no `split` (its DataError: no such file, no entry in its splits), or None."""
        try:
            self.corpus_fingerprints.of(name, split)
        except DataError as missing:
            return missing
        return None

    def fingerprints(self) -> dict:
        """What the data of this run was: the corpus fingerprint of each split and of the
        vocabularies, recorded in checkpoints so that evaluation and resume can compare."""
        vocab = hashlib.sha256(json.dumps(self.vocabularies().to_dict(), sort_keys=True).encode()).hexdigest()[:20]
        return {"vocabularies": vocab, **{split: self.fingerprint(split) for split in SPLITS}}

    def fingerprint(self, split: str) -> str | None:
        """A digest of the corpus's `split` (None when the corpus has no such split)."""
        try:
            return digest(self.corpus_fingerprints.content(split))
        except DataError:  # a corpus without this split (e.g. no test files)
            return None

    def setup(self, stage: str | None = None) -> None:
        """Every process: the vocabularies (from the cache prepare_data filled) and this stage's splits
        (every split without a stage), memory-mapped from the cache, each built first if it is not
        there; rank 0 also saves the vocabularies in the run directory."""
        vocabularies = self.vocabularies()
        if self.run_dir is not None and self.trainer is not None and self.trainer.is_global_zero \
                and not self._saved_to_run_dir:
            vocabularies.save(self.run_dir / "tokenizer")
            self._saved_to_run_dir = True
        for split in self._splits(stage):
            for key in self.keys(split):
                self._load(key)

    def _load(self, split: str) -> None:
        """`split`'s token ids (a key of `keys`: `val/NAME` is corpus NAME's val split),
        memory-mapped from the cache (built first if missing); the training split's re-segmented
        every epoch with data.tokenizer.dropout (data/dropout.py)."""
        if split not in self.datasets:
            base, _, name = split.partition("/")
            table = self._entry(name, base) if name else self._build(split)
            dropout = (EpochDropout.for_table(table, self.vocabularies(), self.options.dropout, self.seed)
                       if split == "train" and self.options.dropout > 0 else None)
            self.datasets[split] = TranslationDataset(table, dropout)
            if split == "train":
                weights = [self.corpora[name].weight for name in self.training]
                self.mixture = Mixture(self.training, self._train_counts, weights, self.temperature, self.seed,
                                       corpus_tokens(table, self._train_counts))
                if len(self.corpora) > 1 or not self.mixture.plain:
                    unused = [name for name in self.corpora if name not in self.training]
                    log.info("an epoch of the training corpora:\n%s", self.mixture.describe(unused))

    def _loader(self, split: str, train: bool) -> DataLoader:
        if split not in self.datasets:
            self.setup({"train": "fit", "val": "validate"}.get(split.partition("/")[0], "test"))
        dataset = self.datasets[split]
        trainer = self.trainer
        sampler = TokenBudgetBatchSampler(
            dataset.sizes(), self.max_tokens if train else self.eval_max_tokens, shuffle=train, seed=self.seed,
            num_replicas=trainer.world_size if trainer else 1, rank=trainer.global_rank if trainer else 0,
            even=train, pad_to_multiple=self.pad_to_multiple,
            epoch_sizes=(lambda epoch: dataset.dropout.sizes(dataset.rows, epoch)) if dataset.dropout else None,
            epoch_rows=self.mixture.rows if train and self.mixture is not None and not self.mixture.plain else None,
            shape_grid=self.shape_grid if train else None,
        )
        if train:
            if self._resume_state is not None:
                sampler.load_state_dict(self._resume_state)
                self._resume_state = None
            padding = "packed, no padding" if self.packed else f"{100 * sampler.padding_fraction():.1f}% padding"
            shapes = f"; shapes (data.shape_grid): {sampler.grid}" if sampler.grid else ""
            log.info("train: %d batches per epoch and process, %s (data.max_tokens=%d)%s%s", len(sampler), padding,
                     self.max_tokens, dropout_note(self.options.type, self.options.dropout), shapes)
        self._samplers[split] = sampler
        ids = self.vocabularies().special_ids()
        collate = Collator(ids["pad_id"], ids["bos_id"], ids["eos_id"], self.pad_to_multiple,
                           packed=self.packed and train, grid=sampler.grid)
        # its own generator: creating an iterator never draws from the global RNG (exact resume)
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=self.num_workers,
                          persistent_workers=self.num_workers > 0, pin_memory=pin_memory(trainer),
                          generator=generator)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        """The validation loader; with several sets (eval_sets), one per set, in their order."""
        loaders = [self._loader(key, train=False) for key in self.keys("val")]
        return loaders[0] if len(loaders) == 1 else loaders

    def test_dataloader(self) -> DataLoader | list[DataLoader]:
        loaders = [self._loader(key, train=False) for key in self.keys(self.split)]
        return loaders[0] if len(loaders) == 1 else loaders

    def on_before_batch_transfer(self, batch: dict, dataloader_idx: int) -> dict:
        """Counts the training batches handed to the loop (the loader runs ahead of it by its
        prefetch, so the sampler's own count is not where training is). The model summary's
        `example_input_array`, a tuple of tensors, passes here too at the start of fit: not counted."""
        if self.trainer is not None and self.trainer.training and isinstance(batch, dict):
            epoch, handed = self._handed
            self._handed = (self.trainer.current_epoch, (handed if epoch == self.trainer.current_epoch else 0) + 1)
        return batch

    def state_dict(self) -> dict:
        """The training sampler's place: the batches of the current epoch the loop has taken (a
        checkpoint is written after a batch's step, so those are finished)."""
        sampler = self._samplers.get("train")
        if sampler is None:
            return {}
        epoch, handed = self._handed
        return {"train_sampler": sampler.state_dict(consumed=handed if epoch == sampler.epoch else 0)}

    def load_state_dict(self, state: dict) -> None:
        self._resume_state = state.get("train_sampler")
        if self._resume_state:
            self._handed = (self._resume_state["epoch"], self._resume_state["consumed"])
