"""Made-up data for the benchmarks: sentence pairs of random ids with a realistic spread of lengths,
cut into token-budget batches as the datamodule cuts them, a placeholder vocabulary of any size for
the module to take its size and special ids from, and made-up English sentences."""

import math
import random

PAD, BOS, EOS = 0, 1, 2  # the special ids of our vocabularies (transformer_mt.data.tokenizer)
WORDS = "a man woman dog child in the on with red blue street park ball plays runs sits looks at big small".split()


def sentences(count: int, fewest: int, most: int, seed: int = 0) -> list[str]:
    """`count` made-up English sentences of `fewest` to `most` words and a full stop."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(fewest, most))) + " ." for _ in range(count)]


def placeholder_vocabularies(size: int):
    """A vocabulary of `size` tokens: <pad>, <s>, </s>, <unk> (ids 0-3), then placeholders: the
    module takes its vocabulary size and special ids from it (the batches are made-up ids)."""
    from tokenizers import Tokenizer, models

    from transformer_mt.data.tokenizer import SPECIAL_TOKENS, UNK, BpeTokenizer, Vocabularies

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    vocab.update({f"t{i}": i for i in range(len(SPECIAL_TOKENS), size)})
    return Vocabularies(BpeTokenizer(Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))))


def synthetic_pairs(n: int, vocab: int, seed: int = 0, median: float = 25.0, max_len: int = 250, min_len: int = 2,
                    target: tuple[float, float] = (0.05, 0.2)):
    """n random sentence pairs as the datamodule's Arrow table (src_ids ending in EOS, tgt_ids
    without specials): source lengths lognormal (median `median`, at least `min_len`), the target's
    the source's times a lognormal factor (mean and sigma of its log: `target`; correlated), both at
    most max_len with their EOS."""
    import datasets
    import numpy as np
    import pyarrow as pa

    from transformer_mt.data.encoding import TRAIN_FEATURES

    rng = np.random.default_rng(seed)
    src_len = np.clip(np.rint(rng.lognormal(math.log(median), 0.6, n)), min_len, max_len).astype(np.int32)
    tgt_len = np.clip(np.rint(src_len * rng.lognormal(*target, n)), 1, max_len - 1).astype(np.int32)

    def lists(lengths, ids):
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids.astype(np.int32)))

    src_ids = rng.integers(4, vocab, int(src_len.sum()))
    src_ids[np.cumsum(src_len) - 1] = EOS  # each source ends in EOS
    tgt_ids = rng.integers(4, vocab, int(tgt_len.sum()))
    columns = {"src_ids": lists(src_len, src_ids), "tgt_ids": lists(tgt_len, tgt_ids),
               "src_len": pa.array(src_len), "tgt_len": pa.array(tgt_len)}
    return datasets.Dataset.from_dict(columns, features=TRAIN_FEATURES)


def token_budget_loader(table, max_tokens: int, pad_to_multiple: int, workers: int, pin: bool, packed: bool = False,
                        shape_grid: int | None = None):
    """Batches as the datamodule's training loader makes them (shuffled, seed 0); packed: data.packed's;
    shape_grid: data.shape_grid's (at most that many shapes)."""
    from torch.utils.data import DataLoader

    from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler, TranslationDataset

    dataset = TranslationDataset(table)
    padding = {"pad_to_multiple": pad_to_multiple} if pad_to_multiple > 1 else {}
    sampler = TokenBudgetBatchSampler(dataset.sizes(), max_tokens, shuffle=True, seed=0, shape_grid=shape_grid,
                                      **padding)
    collate = Collator(PAD, BOS, EOS, packed=packed, grid=sampler.grid, **padding)
    return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=workers,
                      persistent_workers=workers > 0, pin_memory=pin)


def steps_to_cover(loader) -> int:
    """How many batches of `loader` (on a shape grid) come before every shape has come once."""
    sampler = loader.batch_sampler
    sizes, seen = sampler.sizes, set()
    for i, batch in enumerate(sampler.all_batches()):
        seen.add(sampler.grid.shape(int(sizes[batch].max())))
        if len(seen) == len(sampler.grid.lengths):
            return i + 1
    return len(sampler.all_batches())
