"""The Transformer model, pure PyTorch."""

from transformer_mt.model.transformer import Transformer, TransformerConfig

__all__ = ["Transformer", "TransformerConfig"]
