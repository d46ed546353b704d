"""Data: corpora, tokenizer, batching and the LightningDataModule (knows nothing of the model)."""

from transformer_mt.data.corpus import ParallelText, TextFileCorpus
from transformer_mt.data.datamodule import TranslationDataModule
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import DataError

__all__ = ["DataError", "ParallelText", "TextFileCorpus", "ToyCorpus", "TranslationDataModule"]
