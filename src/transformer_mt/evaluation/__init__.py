"""Metrics: corpus BLEU and chrF with their sacreBLEU signatures."""

from transformer_mt.evaluation.metrics import corpus_scores

__all__ = ["corpus_scores"]
