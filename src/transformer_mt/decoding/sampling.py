"""Sampling with temperature, top-k and nucleus (top-p) filtering."""

import torch

from transformer_mt.decoding.search import DecoderState, Hypothesis, max_lengths
from transformer_mt.errors import ConfigError


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits of each row (k <= 0 keeps all); the rest become -inf."""
    if k <= 0 or k >= logits.size(-1):
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of most probable tokens whose probability mass reaches p."""
    if p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # mass of the tokens ranked above each one
    drop_sorted = mass_before >= p  # already reached p without this token
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


class Sampling:
    """Draw each token from the model's distribution, sharpened by temperature and restricted to
    the top_k tokens and / or the top_p nucleus. `nbest` independent samples per sentence, ranked
    by their log-probability under the model; `seed` makes the draws reproducible."""

    def __init__(self, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int | None = None,
                 nbest: int = 1, max_len_a: float = 1.2, max_len_b: int = 10, min_len: int = 0,
                 use_cache: bool = True) -> None:
        if temperature <= 0:
            raise ConfigError(f"decoding.temperature must be > 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise ConfigError(f"decoding.top_p must be in (0, 1], got {top_p}")
        if nbest < 1:
            raise ConfigError(f"decoding.nbest must be >= 1, got {nbest}")
        self.temperature, self.top_k, self.top_p, self.seed, self.nbest = temperature, top_k, top_p, seed, nbest
        self.max_len_a, self.max_len_b, self.min_len, self.use_cache = max_len_a, max_len_b, min_len, use_cache

    def distribution(self, lprobs: torch.Tensor) -> torch.Tensor:
        """The probabilities tokens are drawn from, given the model's log-probabilities."""
        logits = top_p_filter(top_k_filter(lprobs / self.temperature, self.top_k), self.top_p)
        return logits.softmax(dim=-1)

    @torch.no_grad()
    def __call__(self, model, src: torch.Tensor, bos_id: int, eos_id: int) -> list[list[Hypothesis]]:
        batch, n, device = src.size(0), self.nbest, src.device
        pad_id = model.config.pad_id
        generator = None if self.seed is None else torch.Generator(device=device).manual_seed(self.seed)
        limits = max_lengths(src, pad_id, self.max_len_a, self.max_len_b, model.config.max_positions)
        rows = torch.arange(batch, device=device).repeat_interleave(n)
        state = DecoderState(model, src.index_select(0, rows), self.use_cache)
        limits = limits[rows]
        prefix = torch.full((batch * n, 1), bos_id, dtype=torch.long, device=device)
        finished = torch.zeros(batch * n, dtype=torch.bool, device=device)
        scores = torch.zeros(batch * n, device=device)
        for step in range(int(limits.max()) + 1):
            lprobs = state.step(prefix)
            lprobs[:, pad_id] = float("-inf")
            if step < self.min_len:
                lprobs[:, eos_id] = float("-inf")
            token = torch.multinomial(self.distribution(lprobs), 1, generator=generator).squeeze(1)
            token = torch.where(step >= limits, torch.full_like(token, eos_id), token)
            scores += torch.where(finished, 0.0, lprobs.gather(1, token[:, None]).squeeze(1))
            token = torch.where(finished, torch.full_like(token, pad_id), token)
            prefix = torch.cat([prefix, token[:, None]], dim=1)
            finished |= token == eos_id
            if bool(finished.all()):
                break
        out = []
        for i, (row, score) in enumerate(zip(prefix[:, 1:].tolist(), scores.tolist())):
            if i % n == 0:
                out.append([])
            tokens = row[: row.index(eos_id)] if eos_id in row else row
            out[-1].append(Hypothesis(tokens, score, score))
        return [sorted(hyps, key=lambda h: -h.score) for hyps in out]
