"""A vocabulary shortlist (decoding.shortlist): per batch, the output layer computes only the target
tokens that may come out of it, and every search runs over them, as Marian's lexical shortlists and
CTranslate2's vocabulary map do.

A batch's tokens (`Shortlist.rows`, <pad> first): the candidates of every source token in the batch
(a lexical table, data/lexical.py), the frequent target tokens, the special and tag tokens, and
whatever the batch forces (target prefixes, constraint phrases). `Restricted` is a SearchModel whose
output layer holds only those rows (the model's `output_rows`, fp32 or int8): its logits' column j
is token rows[j], and the prefixes it is given are columns too. `shortlisted_search` runs a search
on it (or on an Ensemble of restricted members) with the ids it is given mapped to columns, and
maps the hypotheses back to token ids. The softmax is over the rows (renormalized, as Marian and
CTranslate2 do); a shortlist of every token decodes exactly as no shortlist. <pad> is column 0,
and the search reads padding from the sources as 0: it sees them shifted by one (`columns`), which
Restricted undoes, so that the rules of every search (no <pad> out, lengths counted from the
source) hold whatever id <pad> has (an imported Marian vocabulary's is its last)."""

from dataclasses import dataclass, replace

import torch

from transformer_mt.decoding.ensemble import Ensemble
from transformer_mt.decoding.search import Hypothesis, SearchCache, SearchModel
from transformer_mt.decoding.strategy import Search


class Shortlist:
    """`candidates` (source vocabulary size, K): each source token's candidate target ids, -1 where
    it has fewer; `always` (A,): the target ids every batch may emit (frequent, special, tag tokens);
    `pad_id`: <pad>'s, the first row of every batch."""

    def __init__(self, candidates: torch.Tensor, always: torch.Tensor, pad_id: int) -> None:
        self.candidates, self.pad_id = candidates.long(), pad_id
        self.always = always.long().unique()

    def to(self, device: torch.device | str) -> "Shortlist":
        """Itself, its tensors on `device`."""
        self.candidates, self.always = self.candidates.to(device), self.always.to(device)
        return self

    def rows(self, src: torch.Tensor, forced: torch.Tensor | None = None) -> torch.Tensor:
        """The target ids a batch src (N, S) may emit, <pad> first, the others ascending: its source
        tokens' candidates, the `always` ids, and `forced` (any shape: ids a prefix or a constraint
        needs). The table follows the batch to its device (a module Lightning moved)."""
        if self.candidates.device != src.device:
            self.to(src.device)
        present = src.unique()
        present = present[present < self.candidates.size(0)]
        found = self.candidates.index_select(0, present).flatten()
        parts = [self.always, found[found >= 0]] + ([] if forced is None else [forced.flatten().long()])
        ids = torch.cat(parts).unique()
        return torch.cat([ids.new_tensor([self.pad_id]), ids[ids != self.pad_id]])


@dataclass(frozen=True)
class ColumnConfig:
    """What a search reads of a Restricted model's config: <pad>'s column (0), the positions, and
    the width of the memory (an Ensemble's members')."""

    pad_id: int
    max_positions: int
    d_model: int


def columns(src: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Source ids as a Restricted model's search sees them: padding 0, every token its id + 1."""
    return torch.where(src == pad_id, 0, src + 1)


class Restricted:
    """`model` (a Transformer or its int8 copy) with an output layer of the target ids `rows` only
    (<pad> first): decode gives logits (N, T, C) and takes prefixes of columns (0 ... C - 1); the
    sources it is given are `columns`."""

    normalized = False
    fixed_rows = False

    def __init__(self, model: SearchModel, rows: torch.Tensor) -> None:
        self.model, self.rows, self.pad_id = model, rows, model.config.pad_id
        self.config = ColumnConfig(0, model.config.max_positions, model.config.d_model)
        self.output = model.output_rows(rows)

    def source(self, src: torch.Tensor) -> torch.Tensor:
        """The ids of `columns(src)`."""
        return torch.where(src == 0, self.pad_id, src - 1)

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        return self.model.encode(self.source(src))

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor,
               cache: SearchCache | None = None) -> torch.Tensor:
        return self.output(self.model.decoder_states(self.rows[tgt], memory, self.source(src), cache))

    def init_cache(self, capacity: int | None = None, beams: int = 1, store: bool = True) -> SearchCache:
        return self.model.init_cache(capacity, beams, store)


def forced_ids(prefix_tokens: torch.Tensor | None, constraints: list[list[tuple[int, ...]]] | None,
               device: torch.device) -> torch.Tensor | None:
    """The target ids a batch's prefixes and constraint phrases need (None: none)."""
    ids = [] if prefix_tokens is None else [prefix_tokens.flatten()]
    phrased = [t for phrases in constraints or [] for phrase in phrases for t in phrase]
    if phrased:
        ids.append(torch.tensor(phrased, dtype=torch.long, device=device))
    return torch.cat(ids) if ids else None


def shortlisted_search(search: Search, members: list[SearchModel], rows: torch.Tensor, src: torch.Tensor,
                       bos_id: int, eos_id: int, prefix_tokens: torch.Tensor | None = None,
                       constraints: list[list[tuple[int, ...]]] | None = None, free_prefix: int = 0
                       ) -> list[list[Hypothesis]]:
    """`search` over the target ids `rows` (Shortlist.rows: <pad> first, then BOS, EOS and every id
    of the prefixes and constraints among the others) of `members` (one model, or an ensemble's),
    its hypotheses in token ids."""
    config = members[0].config
    column = torch.full((config.tgt_vocab_size,), -1, dtype=torch.long, device=rows.device)
    column[rows] = torch.arange(rows.numel(), device=rows.device)
    restricted = [Restricted(member, rows) for member in members]
    model = restricted[0] if len(restricted) == 1 else Ensemble(restricted)
    bos, eos = column[[bos_id, eos_id]].tolist()
    lookup = None if constraints is None else column.tolist()
    phrases = None if lookup is None else [[tuple(lookup[t] for t in phrase) for phrase in row] for row in constraints]
    found = search(model, columns(src, config.pad_id), bos, eos,
                   None if prefix_tokens is None else column[prefix_tokens], phrases, free_prefix)
    ids = rows.tolist()
    return [[replace(h, tokens=[ids[t] for t in h.tokens]) for h in nbest] for nbest in found]
