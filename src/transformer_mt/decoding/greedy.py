"""Greedy search: the most probable token at every step."""

import torch

from transformer_mt.decoding.search import DecoderState, Hypothesis, ban_repeated_ngrams, max_lengths


class GreedySearch:
    """Pick the most probable token until EOS or the length limit (max_len_a * src_len + max_len_b
    tokens, then EOS is forced). EOS is banned before min_len tokens."""

    def __init__(self, max_len_a: float = 1.2, max_len_b: int = 10, min_len: int = 0,
                 no_repeat_ngram_size: int = 0, use_cache: bool = True) -> None:
        self.max_len_a, self.max_len_b, self.min_len = max_len_a, max_len_b, min_len
        self.no_repeat_ngram_size, self.use_cache = no_repeat_ngram_size, use_cache

    @torch.no_grad()
    def __call__(self, model, src: torch.Tensor, bos_id: int, eos_id: int) -> list[list[Hypothesis]]:
        pad_id = model.config.pad_id
        limits = max_lengths(src, pad_id, self.max_len_a, self.max_len_b, model.config.max_positions)
        state = DecoderState(model, src, self.use_cache)
        prefix = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        scores = torch.zeros(src.size(0), device=src.device)
        for step in range(int(limits.max()) + 1):
            lprobs = ban_repeated_ngrams(state.step(prefix), prefix, self.no_repeat_ngram_size)
            if step < self.min_len:
                lprobs[:, eos_id] = float("-inf")
            best = lprobs.argmax(-1)
            best = torch.where(step >= limits, torch.full_like(best, eos_id), best)
            scores += torch.where(finished, 0.0, lprobs.gather(1, best[:, None]).squeeze(1))
            best = torch.where(finished, torch.full_like(best, pad_id), best)
            prefix = torch.cat([prefix, best[:, None]], dim=1)
            finished |= best == eos_id
            if bool(finished.all()):
                break
        hyps = []
        for row, score in zip(prefix[:, 1:].tolist(), scores.tolist()):
            tokens = row[: row.index(eos_id)] if eos_id in row else row
            hyps.append([Hypothesis(tokens, score, score)])
        return hyps
