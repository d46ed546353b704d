"""Beam search, batched over sentences and beams, with fairseq's finalization rules."""

import torch

from transformer_mt.decoding.search import DecoderState, Hypothesis, Rules, SearchModel
from transformer_mt.errors import ConfigError
from transformer_mt.model.quantize import check_quantize

LENGTH_NORMS = ("fairseq", "gnmt")


class BeamSearch:
    """Keep the `beam_size` best prefixes of every sentence; all sentences advance together.

    Each step takes the 2 x beam_size best extensions of a sentence's beams. An extension ending
    in EOS that ranks among the first beam_size is finished: its score is
        sum of token log-probabilities (EOS included) / norm(length)
    with length = tokens including EOS and norm = length ** length_penalty (length_norm=fairseq;
    length_penalty=0 disables it, 1 is the average log-probability) or GNMT's
    ((5 + length) / 6) ** length_penalty (length_norm=gnmt, what the Transformer paper used). The
    best beam_size extensions that do not end in EOS go on; finished hypotheses are never extended.
    A sentence stops when it has beam_size finished hypotheses (early stopping) and leaves the
    batch; the search ends when all have stopped. At max_len_a * src_len + max_len_b tokens EOS is
    forced; before min_len tokens it is banned.
    no_repeat_ngram_size > 0 bans any n-gram from occurring twice. `nbest` best are returned.
    quantize=int8: run on an int8 copy of the model (which the caller, TranslationModule, makes; CPU).
    """

    def __init__(self, beam_size: int = 4, length_penalty: float = 1.0, max_len_a: float = 1.2,
                 max_len_b: int = 10, min_len: int = 0, nbest: int = 1, no_repeat_ngram_size: int = 0,
                 use_cache: bool = True, quantize: str = "none", length_norm: str = "fairseq") -> None:
        self.quantize = check_quantize(quantize)
        if length_norm not in LENGTH_NORMS:
            raise ConfigError(f"decoding.length_norm={length_norm!r}: must be one of {', '.join(LENGTH_NORMS)}")
        self.length_norm = length_norm
        if beam_size < 1:
            raise ConfigError(f"decoding.beam_size must be >= 1, got {beam_size}")
        if not 1 <= nbest <= beam_size:
            raise ConfigError(f"decoding.nbest must be between 1 and decoding.beam_size={beam_size}, got {nbest}")
        self.beam_size, self.length_penalty, self.nbest = beam_size, length_penalty, nbest
        self.rules = Rules(max_len_a, max_len_b, min_len, no_repeat_ngram_size)
        self.use_cache = use_cache

    @torch.no_grad()
    def __call__(self, model: SearchModel, src: torch.Tensor, bos_id: int, eos_id: int) -> list[list[Hypothesis]]:
        batch, k, device = src.size(0), self.beam_size, src.device
        pad_id = model.config.pad_id
        limits = self.rules.limits(model, src)
        state = DecoderState(model, src, self.use_cache, beams=k)  # one memory row per sentence, k prefix rows
        active = torch.arange(batch, device=device)  # sentences still searching
        prefix = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=device)
        scores = torch.zeros(batch, k, device=device)
        scores[:, 1:] = float("-inf")  # all beams start equal: expand only the first one
        scores = scores.view(-1)
        finished: list[list[Hypothesis]] = [[] for _ in range(batch)]

        for step in range(int(limits.max()) + 1):
            n = active.numel()
            at_limit = (step >= limits[active]).repeat_interleave(k)
            lprobs = self.rules.apply(state.step(prefix), prefix, step, at_limit, eos_id, pad_id)
            vocab = lprobs.size(1)
            candidates = lprobs.add_(scores[:, None]).view(n, k * vocab)  # in place: lprobs is not needed again
            top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=1)
            top_beam, top_token = top_index // vocab, top_index % vocab
            self.finish(finished, active, prefix, step, top_scores, top_beam, top_token == eos_id)

            # the beam_size best extensions that do not end in EOS carry on; where fewer than
            # beam_size are possible, the rest copy the best one with score -inf (dead beams)
            open_scores = top_scores.masked_fill(top_token == eos_id, float("-inf"))
            next_scores, pick = open_scores.topk(k, dim=1)
            pick = torch.where(torch.isfinite(next_scores), pick, pick[:, :1])
            going = torch.tensor([len(finished[int(s)]) < k for s in active], device=device)
            going &= torch.isfinite(next_scores[:, 0])
            if not bool(going.any()):
                break
            keep = going.nonzero().squeeze(1)
            rows = (keep[:, None] * k + top_beam.gather(1, pick)[keep]).view(-1)
            prefix = torch.cat([prefix[rows], top_token.gather(1, pick)[keep].view(-1, 1)], dim=1)
            scores = next_scores[keep].view(-1)
            state.reorder(rows, keep if keep.numel() < n else None)  # the memory changes when sentences stop
            active = active[keep]
        return self.best(finished)

    def finish(self, finished: list[list[Hypothesis]], active: torch.Tensor, prefix: torch.Tensor, step: int,
               top_scores: torch.Tensor, top_beam: torch.Tensor, is_eos: torch.Tensor) -> None:
        """Record the candidates (active sentences x 2 beam_size) that end in EOS and rank among
        their sentence's first beam_size, while it has fewer than beam_size finished hypotheses;
        the score is normalized by length (tokens + EOS): `normalizer`."""
        k = self.beam_size
        ends = is_eos & torch.isfinite(top_scores)
        ends[:, k:] = False
        for i, j in ends.nonzero().tolist():
            sentence = int(active[i])
            if len(finished[sentence]) < k:
                logprob = float(top_scores[i, j])
                tokens = prefix[i * k + int(top_beam[i, j]), 1:].tolist()
                finished[sentence].append(Hypothesis(tokens, logprob / self.normalizer(step + 1), logprob))

    def normalizer(self, length: int) -> float:
        """What a finished hypothesis' log-probability is divided by (length: tokens + EOS)."""
        if self.length_norm == "gnmt":
            return ((5 + length) / 6) ** self.length_penalty
        return length ** self.length_penalty

    def best(self, finished: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
        """The nbest finished hypotheses of each sentence, best first; a sentence whose rules no
        hypothesis could meet gets one empty, impossible hypothesis."""
        empty = Hypothesis([], float("-inf"), float("-inf"))
        return [sorted(hyps, key=lambda h: -h.score)[: self.nbest] or [empty] for hyps in finished]
