"""Data: corpora, vocabularies, batching and the LightningDataModule (knows nothing of the model).

TranslationDataModule (Lightning) and HubCorpus (the datasets hub) are imported when first named
(configs name them as `transformer_mt.data.TranslationDataModule`), so that what needs only the
vocabularies or the files (transformer_mt.inference) loads neither Lightning nor datasets."""

from transformer_mt.data.corpus import ParallelText, TableCorpus, TextFileCorpus
from transformer_mt.data.tokenizer import TokenizerOptions, Vocabularies
from transformer_mt.data.toy import ToyCorpus
from transformer_mt.errors import DataError

__all__ = ["DataError", "HubCorpus", "ParallelText", "TableCorpus", "TextFileCorpus", "TokenizerOptions",
           "ToyCorpus", "TranslationDataModule", "Vocabularies"]


def __getattr__(name: str):
    """TranslationDataModule and HubCorpus, imported on first use (a module's __getattr__, PEP 562)."""
    if name == "TranslationDataModule":
        from transformer_mt.data.datamodule import TranslationDataModule

        return TranslationDataModule
    if name == "HubCorpus":
        from transformer_mt.data.hub import HubCorpus

        return HubCorpus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
