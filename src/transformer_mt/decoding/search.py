"""What every search strategy shares: the model interface it needs (SearchModel), hypotheses, the
rules every search obeys (Rules: length limits, EOS, padding, repeated n-grams), and the decoder
state that runs the model one step at a time (with the KV cache, or by re-decoding the prefix for
comparison)."""

from dataclasses import dataclass
from typing import Any, Protocol

import torch


class SearchModel(Protocol):
    """What a search needs from a model; `transformer_mt.model.Transformer` is one, and so are the
    hand-built toy models of the tests."""

    config: Any  # .pad_id and .max_positions are read

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """(N, S) source ids -> memory."""

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor, cache: Any = None,
               beams: int = 1) -> torch.Tensor:
        """(N, T) prefixes -> logits (N, T, V); with a cache, T = 1 (the newest token). memory and
        src have N / beams rows: `beams` consecutive prefixes (the beams of a sentence) share one
        (beams = 1: one memory row per prefix). Any other layout is a ValueError."""

    def init_cache(self) -> Any:
        """An empty incremental-decoding cache."""

    def reorder_cache(self, cache: Any, index: torch.Tensor, memory_index: torch.Tensor | None = None) -> Any:
        """The cache of the prefixes' rows `index` (beams move between rows), and of the memory's
        rows `memory_index` (None: the memory's part stays)."""


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # the search's score: sum of token log-probabilities (EOS included), length-normalized by beam
    logprob: float  # sum of token log-probabilities, EOS included


def max_lengths(src: torch.Tensor, pad_id: int, a: float, b: int, max_positions: int) -> torch.Tensor:
    """Per-sentence limit on output tokens (EOS excluded): a * src_len + b, src_len counting the
    source EOS, kept inside the model's position table."""
    src_len = (src != pad_id).sum(dim=1)
    return (a * src_len + b).long().clamp(min=1, max=max_positions - 2)


@dataclass
class Rules:
    """The rules every search obeys, in one place: at most max_len_a * src_len + max_len_b output
    tokens (then EOS is forced, with its own probability), no EOS before min_len tokens, never
    <pad>, and with no_repeat_ngram_size > 0 no n-gram twice."""

    max_len_a: float = 1.2
    max_len_b: int = 10
    min_len: int = 0
    no_repeat_ngram_size: int = 0

    def limits(self, model: SearchModel, src: torch.Tensor) -> torch.Tensor:
        """The output length limit of each source row."""
        return max_lengths(src, model.config.pad_id, self.max_len_a, self.max_len_b, model.config.max_positions)

    def apply(self, lprobs: torch.Tensor, prefix: torch.Tensor, step: int, at_limit: torch.Tensor, eos_id: int,
              pad_id: int) -> torch.Tensor:
        """lprobs (N, V) of the token after `prefix` (N, step + 1) with the rules applied; rows with
        at_limit (N,) True may only end (EOS keeps its probability)."""
        eos = lprobs[:, eos_id].clone()
        lprobs[:, pad_id] = float("-inf")
        lprobs = ban_repeated_ngrams(lprobs, prefix, self.no_repeat_ngram_size)
        if step < self.min_len:
            lprobs[:, eos_id] = float("-inf")
        if bool(at_limit.any()):
            lprobs[at_limit] = float("-inf")
            lprobs[at_limit, eos_id] = eos[at_limit]
        return lprobs


class DecoderState:
    """Encodes a source batch once and returns next-token log-probabilities for growing prefixes.

    With use_cache, each step feeds only the newest token and K, V of earlier steps come from the
    model's cache; without it, the whole prefix is decoded again (for tests and benchmarks).
    `reorder(index, memory_index)` selects prefix rows of the cache and rows of the memory (None:
    the memory stays). The prefixes come `beams` per memory row, consecutive (the beams of a
    sentence share its memory row); beams = 1: one prefix per memory row.
    """

    def __init__(self, model: SearchModel, src: torch.Tensor, use_cache: bool = True, beams: int = 1) -> None:
        self.model, self.src, self.beams = model, src, beams
        self.memory = model.encode(src)
        self.cache = model.init_cache() if use_cache else None

    def step(self, prefix: torch.Tensor) -> torch.Tensor:
        """prefix (N, t) starting with BOS -> log-probabilities (N, V) of token t+1, in fp32."""
        if self.cache is not None:
            logits = self.model.decode(prefix[:, -1:], self.memory, self.src, cache=self.cache, beams=self.beams)
        else:
            logits = self.model.decode(prefix, self.memory, self.src, beams=self.beams)
        return logits[:, -1].float().log_softmax(dim=-1)

    def reorder(self, index: torch.Tensor, memory_index: torch.Tensor | None = None) -> None:
        if memory_index is not None:
            self.memory = self.memory.index_select(0, memory_index)
            self.src = self.src.index_select(0, memory_index)
        if self.cache is not None:
            self.cache = self.model.reorder_cache(self.cache, index, memory_index)


def ban_repeated_ngrams(lprobs: torch.Tensor, prefix: torch.Tensor, n: int) -> torch.Tensor:
    """Set to -inf every token that would complete an n-gram already present in the prefix
    (BOS excluded); prefix (N, t), lprobs (N, V)."""
    tokens = prefix[:, 1:]
    if n <= 0 or tokens.size(1) < n:
        return lprobs
    grams = tokens.unfold(1, n, 1)  # (N, t - n + 1, n)
    tail = tokens[:, tokens.size(1) - n + 1 :]  # the last n - 1 tokens
    match = (grams[:, :, : n - 1] == tail[:, None, :]).all(dim=-1)  # (N, t - n + 1)
    rows, cols = match.nonzero(as_tuple=True)
    lprobs = lprobs.clone()
    lprobs[rows, grams[rows, cols, n - 1]] = float("-inf")
    return lprobs


def token_by_token(model: SearchModel, src: torch.Tensor, bos_id: int, eos_id: int, rules: Rules, pick,
                   copies: int = 1, use_cache: bool = True) -> list[Hypothesis]:
    """Extend every row by the token `pick(lprobs)` chooses (lprobs with the rules applied) until
    EOS; a row that ends leaves the batch, so the model only runs on unfinished ones. Each source
    is encoded once and decoded `copies` times in consecutive rows (its memory row copied too, so
    one prefix per memory row: beams = 1). One hypothesis per row."""
    limits = rules.limits(model, src)
    state = DecoderState(model, src, use_cache, beams=1)
    if copies > 1:
        rows = torch.arange(src.size(0), device=src.device).repeat_interleave(copies)
        state.reorder(rows, rows)
        limits = limits[rows]
    n, steps = limits.numel(), int(limits.max()) + 1
    out = torch.full((n, steps), eos_id, dtype=torch.long, device=src.device)  # each row's tokens, then EOS
    scores = torch.zeros(n, device=src.device)
    alive = torch.arange(n, device=src.device)  # the rows still decoding, in the order of the batch
    prefix = torch.full((n, 1), bos_id, dtype=torch.long, device=src.device)
    for step in range(steps):
        lprobs = rules.apply(state.step(prefix), prefix, step, step >= limits, eos_id, model.config.pad_id)
        token = pick(lprobs)
        scores[alive] += lprobs.gather(1, token[:, None]).squeeze(1)
        out[alive, step] = token
        ended = token == eos_id
        if bool(ended.any()):  # rules force EOS at each row's limit: every row ends within `steps`
            keep = (~ended).nonzero().squeeze(1)
            if keep.numel() == 0:
                break
            alive, prefix, limits, token = alive[keep], prefix[keep], limits[keep], token[keep]
            state.reorder(keep, keep)
        prefix = torch.cat([prefix, token[:, None]], dim=1)
    hyps = []
    for row, score in zip(out.tolist(), scores.tolist()):
        hyps.append(Hypothesis(row[: row.index(eos_id)], score, score))
    return hyps
