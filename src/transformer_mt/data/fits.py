"""Whether every sentence of a split fits its batch budget and the model: checked when the splits are
built, before training, so that a bad validation or test line stops the run then, not after."""

import numpy as np

from transformer_mt.data.batching import first_above, round_up
from transformer_mt.data.corpus import Corpus
from transformer_mt.errors import ConfigError, DataError


def check_fits(corpus: Corpus, split: str, sizes: np.ndarray, budget: int, pad_to_multiple: int, max_len: int,
               max_positions: int | None) -> None:
    """Each of `split`'s sentence `sizes` (padded to `pad_to_multiple`) within `budget` (data.max_tokens
    for training, data.eval_max_tokens else) and, for val and test with `max_positions`, the model.
    Training pairs passed data.max_len's filter: one above the budget names data.max_len."""
    padded = round_up(sizes, pad_to_multiple)
    train = split == "train"
    if (i := first_above(padded, budget)) is not None:
        if pad_to_multiple > 1:
            budget = f"{budget} (lengths padded to a multiple of data.pad_to_multiple={pad_to_multiple})"
        if train:
            raise ConfigError(f"data.max_len={max_len} keeps training pairs of {padded[i]} tokens, more than the "
                              f"batch budget data.max_tokens={budget}: lower data.max_len or raise data.max_tokens")
        raise DataError(f"{corpus.location(split, i)}: {padded[i]} tokens, more than the batch budget "
                        f"data.eval_max_tokens={budget} ({split} sentences are never filtered)")
    if not train and (i := first_above(sizes, max_positions)) is not None:
        raise DataError(f"{corpus.location(split, i)}: {sizes[i]} tokens (with BOS or EOS), more than the model "
                        f"takes, model.max_positions={max_positions} ({split} sentences are never filtered)")
