"""TranslationDataModule: corpus -> joint BPE -> token ids -> token-budget batches."""

import logging
from pathlib import Path

import lightning as L
from tokenizers import Tokenizer
from torch.utils.data import DataLoader

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset
from transformer_mt.data.corpus import SPLITS, ParallelText
from transformer_mt.data.tokenizer import encode, load_tokenizer, save_tokenizer, special_ids, train_bpe
from transformer_mt.errors import DataError

log = logging.getLogger(__name__)


class TranslationDataModule(L.LightningDataModule):
    """Serves train / val batches for `fit` and the `split` split (test by default) for `test`.

    corpus: any object with `load(split) -> ParallelText` (ToyCorpus, TextFileCorpus).
    tokenizer_path: where the BPE model is written after training on the train split, and read
    from by every process; an existing file there (or `set_tokenizer`) is used as it is.
    """

    def __init__(self, corpus, tokenizer_path: str, vocab_size: int = 8000, min_frequency: int = 2,
                 lowercase: bool = False, max_tokens: int = 4096, eval_max_tokens: int | None = None,
                 max_len: int = 256, split: str = "test", seed: int = 0, num_workers: int = 0) -> None:
        super().__init__()
        if split not in SPLITS:
            raise DataError(f"data.split must be one of {list(SPLITS)}, got {split!r}")
        self.corpus, self.tokenizer_path = corpus, Path(tokenizer_path)
        self.vocab_size, self.min_frequency, self.lowercase = vocab_size, min_frequency, lowercase
        self.max_tokens, self.eval_max_tokens = max_tokens, eval_max_tokens or max_tokens
        self.max_len, self.split, self.seed, self.num_workers = max_len, split, seed, num_workers
        self.tokenizer: Tokenizer | None = None
        self.datasets: dict[str, TranslationDataset] = {}

    # ------------------------------------------------------------------------------ tokenizer
    def set_tokenizer(self, tokenizer: Tokenizer) -> None:
        """Use this tokenizer (e.g. the one inside a checkpoint) instead of training one."""
        self.tokenizer = tokenizer

    def prepare_data(self) -> None:
        """Train the joint BPE on the training split once and save it (local rank 0 only)."""
        if self.tokenizer is not None or self.tokenizer_path.is_file():
            return
        train = self.corpus.load("train")
        log.info("training a joint BPE tokenizer (vocab_size=%d) on %d pairs", self.vocab_size, len(train))
        tokenizer = train_bpe(train.src + train.tgt, self.vocab_size, self.min_frequency, self.lowercase)
        save_tokenizer(tokenizer, self.tokenizer_path)

    def load_tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            self.prepare_data()
            self.tokenizer = load_tokenizer(self.tokenizer_path)
        return self.tokenizer

    # ---------------------------------------------------------------------------------- data
    def setup(self, stage: str | None = None) -> None:
        splits = {"fit": ["train", "val"], "validate": ["val"], "test": [self.split], "predict": [self.split]}
        for split in splits.get(stage, list(SPLITS)):
            if split not in self.datasets:
                self.datasets[split] = self._encode(self.corpus.load(split), train=split == "train")

    def _encode(self, text: ParallelText, train: bool) -> TranslationDataset:
        tokenizer = self.load_tokenizer()
        eos = special_ids(tokenizer)["eos_id"]
        src = [ids + [eos] for ids in encode(tokenizer, text.src)]
        tgt = encode(tokenizer, text.tgt)
        src_text, tgt_text = text.src, text.tgt
        if train:
            keep = [i for i in range(len(src)) if len(src[i]) <= self.max_len and len(tgt[i]) + 1 <= self.max_len]
            removed = len(src) - len(keep)
            if removed:
                log.info("%s: removed %d of %d pairs longer than data.max_len=%d tokens",
                         text.name, removed, len(src), self.max_len)
            if not keep:
                raise DataError(f"{text.name}: no training pairs left after filtering (data.max_len={self.max_len})")
            src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
            src_text, tgt_text = [src_text[i] for i in keep], [tgt_text[i] for i in keep]
        return TranslationDataset(src, tgt, src_text, tgt_text)

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
        ids = special_ids(self.load_tokenizer())
        collate = Collator(ids["pad_id"], ids["bos_id"], ids["eos_id"])
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=self.num_workers,
                          persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", train=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.split, train=False)
