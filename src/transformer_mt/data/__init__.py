"""Data: corpora, vocabularies, batching and the LightningDataModule (knows nothing of the model)."""

from transformer_mt.data.corpus import ParallelText, TableCorpus, TextFileCorpus
from transformer_mt.data.datamodule import TranslationDataModule
from transformer_mt.data.hub import HubCorpus
from transformer_mt.data.tokenizer import TokenizerOptions, Vocabularies
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import DataError

__all__ = ["DataError", "HubCorpus", "ParallelText", "TableCorpus", "TextFileCorpus", "TokenizerOptions",
           "ToyCorpus", "TranslationDataModule", "Vocabularies"]
