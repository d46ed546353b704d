"""transformer-mt: the Transformer of "Attention Is All You Need" for machine translation."""

__version__ = "0.1.0"
