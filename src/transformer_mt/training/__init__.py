"""Lightning: the TranslationModule, its loss and learning-rate schedules."""

from transformer_mt.training.module import TranslationModule

__all__ = ["TranslationModule"]
