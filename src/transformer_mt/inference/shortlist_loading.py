"""A checkpoint's vocabulary shortlist for decoding (decoding.shortlist=true): its lexical table
(checkpoints/shortlist_file.py), read and checked, as the Shortlist a Translator restricts each batch
with (decoding/shortlist.py): the table's candidates, and always its frequent ids, the special
tokens and the target vocabulary's tags."""

from itertools import chain
from pathlib import Path

import numpy as np
import torch

from transformer_mt.checkpoints.shortlist_file import (
    check_shortlist_exists,
    read_shortlist,
    shortlist_path,
    vocabulary_digest,
)
from transformer_mt.data.tokenizer import Vocabularies
from transformer_mt.decoding.shortlist import Shortlist


def always_ids(vocabularies: Vocabularies, frequent: list[int]) -> list[int]:
    """The target ids every batch may emit: `frequent`, <pad>, <s>, </s>, <unk> and the tags."""
    tgt = vocabularies.tgt
    tags = [tgt.token_id(token) for token in tgt.tag_tokens()]
    return [*frequent, *vocabularies.special_ids().values(), *tags]


def padded(table: list[list[int]]) -> torch.Tensor:
    """The rows of `table` in a tensor (len(table), longest), -1 after each row's ids."""
    lengths = np.array([len(row) for row in table], dtype=np.int64)
    out = np.full((len(table), max(int(lengths.max(initial=0)), 1)), -1, dtype=np.int64)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    columns = np.arange(int(lengths.sum())) - starts
    out[np.repeat(np.arange(len(table)), lengths), columns] = np.fromiter(chain.from_iterable(table), np.int64,
                                                                           count=int(lengths.sum()))
    return torch.from_numpy(out)


def checked_table(checkpoint: Path, vocabularies: Vocabularies) -> dict:
    """The lexical table beside `checkpoint`, read and checked against its vocabularies (missing or
    damaged: one line naming it)."""
    path = check_shortlist_exists(checkpoint)
    return read_shortlist(path, checkpoint, vocabulary_digest(vocabularies.to_dict()), vocabularies.src.vocab_size,
                          vocabularies.tgt.vocab_size)


def table_beside(checkpoint: Path, vocabularies: Vocabularies) -> dict | None:
    """checked_table, or None when `checkpoint` has no table (what an export carries if it is there)."""
    return checked_table(checkpoint, vocabularies) if shortlist_path(checkpoint).is_file() else None


def load_shortlist(checkpoint: Path, vocabularies: Vocabularies) -> Shortlist:
    """The Shortlist of `checkpoint`'s table (a missing or damaged one: one line naming it)."""
    data = checked_table(checkpoint, vocabularies)
    always = torch.tensor(always_ids(vocabularies, data["frequent_ids"]), dtype=torch.long)
    return Shortlist(padded(data["table"]), always, vocabularies.special_ids()["pad_id"])
