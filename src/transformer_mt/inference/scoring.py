"""Forced decoding: the log-probability a Translator's model gives each target token (and EOS) for
its source, batched by a token budget, in input order (task=score; as fairseq's, sockeye's and
marian-scorer's scoring do)."""

import torch

from transformer_mt.data.batching import Collator, TokenBudgetBatchSampler
from transformer_mt.inference.translator import Translator
from transformer_mt.progress import ProgressBar

Ids = list[list[int]]


@torch.no_grad()
def token_logprobs(translator: Translator, src: Ids, tgt: Ids, max_tokens: int,
                   bar: ProgressBar | None = None) -> list[list[float]]:
    """The log-probability of each target token and then EOS, given its source (ids with EOS) and
    the target's prefix (teacher forcing, one forward pass a batch, with the int8 rule); in input
    order. `bar` advances by pairs."""
    collate = Collator(translator.pad_id, translator.bos_id, translator.eos_id)
    bos, eos = translator.bos_id, translator.eos_id
    sizes = [max(len(s), len(t) + 1) for s, t in zip(src, tgt)]  # what a pair costs, as in training
    sampler = TokenBudgetBatchSampler(sizes, max([max_tokens, *sizes]), shuffle=False)
    out: list[list[float]] = [[] for _ in src]
    for batch in sampler:
        source = collate.pad([src[j] for j in batch]).to(translator.device)
        tgt_in = collate.pad([[bos, *tgt[j]] for j in batch]).to(translator.device)
        tgt_out = collate.pad([[*tgt[j], eos] for j in batch]).to(translator.device)
        picked = translator.log_probs(source, tgt_in).gather(-1, tgt_out[..., None]).squeeze(-1).tolist()
        for j, row in zip(batch, picked):
            out[j] = row[: len(tgt[j]) + 1]
        if bar is not None:
            bar.advance(len(batch))
    return out
