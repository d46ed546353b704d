"""Greedy search with the model's KV cache."""

import torch

from transformer_mt.decoding.search import Hypothesis, max_lengths


class GreedySearch:
    """Pick the most probable token at every step until EOS or the length limit.

    The limit is max_len_a * src_len + max_len_b target tokens (src_len counts the source EOS),
    after which EOS is forced.
    """

    def __init__(self, max_len_a: float = 1.2, max_len_b: int = 10) -> None:
        self.max_len_a, self.max_len_b = max_len_a, max_len_b

    @torch.no_grad()
    def __call__(self, model, src: torch.Tensor, bos_id: int, eos_id: int) -> list[list[Hypothesis]]:
        pad_id = model.config.pad_id
        batch = src.size(0)
        limits = max_lengths(src, pad_id, self.max_len_a, self.max_len_b, model.config.max_positions)
        memory = model.encode(src)
        cache = model.init_cache()
        token = torch.full((batch, 1), bos_id, dtype=torch.long, device=src.device)
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
        scores = torch.zeros(batch, device=src.device)
        steps = []
        for step in range(int(limits.max()) + 1):
            lprobs = model.decode(token, memory, src, cache=cache)[:, -1].float().log_softmax(-1)
            best = lprobs.argmax(-1)
            best = torch.where(step >= limits, torch.full_like(best, eos_id), best)
            scores += torch.where(finished, 0.0, lprobs.gather(1, best[:, None]).squeeze(1))
            best = torch.where(finished, torch.full_like(best, pad_id), best)
            steps.append(best)
            finished |= best == eos_id
            if bool(finished.all()):
                break
            token = best[:, None]
        out = torch.stack(steps, dim=1).tolist()
        hyps = []
        for row, score in zip(out, scores.tolist()):
            tokens = row[: row.index(eos_id)] if eos_id in row else row
            hyps.append([Hypothesis(tokens, score)])
        return hyps
