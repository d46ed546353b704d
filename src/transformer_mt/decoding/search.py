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

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor, cache: Any = None) -> torch.Tensor:
        """(N, T) prefixes -> logits (N, T, V); with a cache, T = 1 (the newest token)."""

    def init_cache(self) -> Any:
        """An empty incremental-decoding cache."""

    def reorder_cache(self, cache: Any, index: torch.Tensor) -> Any:
        """The cache's rows `index` (beams move between rows)."""


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
    `reorder(index)` selects rows (sentences x beams) of the memory and the cache.
    """

    def __init__(self, model: SearchModel, src: torch.Tensor, use_cache: bool = True) -> None:
        self.model, self.src = model, src
        self.memory = model.encode(src)
        self.cache = model.init_cache() if use_cache else None

    def step(self, prefix: torch.Tensor) -> torch.Tensor:
        """prefix (N, t) starting with BOS -> log-probabilities (N, V) of token t+1, in fp32."""
        if self.cache is not None:
            logits = self.model.decode(prefix[:, -1:], self.memory, self.src, cache=self.cache)
        else:
            logits = self.model.decode(prefix, self.memory, self.src)
        return logits[:, -1].float().log_softmax(dim=-1)

    def reorder(self, index: torch.Tensor) -> None:
        self.memory = self.memory.index_select(0, index)
        self.src = self.src.index_select(0, index)
        if self.cache is not None:
            self.cache = self.model.reorder_cache(self.cache, index)


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
    EOS. Each source is encoded once and decoded `copies` times in consecutive rows. Returns one
    hypothesis per row."""
    pad_id = model.config.pad_id
    limits = rules.limits(model, src)
    state = DecoderState(model, src, use_cache)
    if copies > 1:
        rows = torch.arange(src.size(0), device=src.device).repeat_interleave(copies)
        state.reorder(rows)
        limits = limits[rows]
    n = limits.numel()
    prefix = torch.full((n, 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(n, dtype=torch.bool, device=src.device)
    scores = torch.zeros(n, device=src.device)
    for step in range(int(limits.max()) + 1):
        lprobs = rules.apply(state.step(prefix), prefix, step, step >= limits, eos_id, pad_id)
        token = pick(lprobs.masked_fill(finished[:, None], 0.0))  # finished rows: anything (padding follows)
        scores += torch.where(finished, 0.0, lprobs.gather(1, token[:, None]).squeeze(1))
        token = torch.where(finished, torch.full_like(token, pad_id), token)
        prefix = torch.cat([prefix, token[:, None]], dim=1)
        finished |= token == eos_id
        if bool(finished.all()):
            break
    hyps = []
    for row, score in zip(prefix[:, 1:].tolist(), scores.tolist()):
        tokens = row[: row.index(eos_id)] if eos_id in row else row
        hyps.append(Hypothesis(tokens, score, score))
    return hyps
