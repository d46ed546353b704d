"""What every search strategy shares: hypotheses, length limits, and the decoder state that runs
the model one step at a time (with the KV cache, or by re-decoding the prefix for comparison)."""

from dataclasses import dataclass

import torch


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


class DecoderState:
    """Encodes a source batch once and returns next-token log-probabilities for growing prefixes.

    With use_cache, each step feeds only the newest token and K, V of earlier steps come from the
    model's cache; without it, the whole prefix is decoded again (for tests and benchmarks).
    `reorder(index)` selects rows (sentences x beams) of the memory and the cache.
    """

    def __init__(self, model, src: torch.Tensor, use_cache: bool = True) -> None:
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


def token_by_token(model, src: torch.Tensor, bos_id: int, eos_id: int, limits: torch.Tensor, pick,
                   copies: int = 1, min_len: int = 0, no_repeat_ngram_size: int = 0,
                   use_cache: bool = True) -> list[Hypothesis]:
    """Extend every row by the token `pick(lprobs)` chooses until EOS or its length limit (then EOS
    is forced); EOS is banned before min_len tokens, padding always. Each source is encoded once
    and decoded `copies` times in consecutive rows. Returns one hypothesis per row."""
    pad_id = model.config.pad_id
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
        lprobs = state.step(prefix)
        lprobs[:, pad_id] = float("-inf")
        lprobs = ban_repeated_ngrams(lprobs, prefix, no_repeat_ngram_size)
        if step < min_len:
            lprobs[:, eos_id] = float("-inf")
        token = pick(lprobs)
        token = torch.where(step >= limits, torch.full_like(token, eos_id), token)
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
