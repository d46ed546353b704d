"""Beam search, batched over sentences and beams, with fairseq's finalization rules."""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from transformer_mt.decoding.constraints import ConstrainedBeamRun, Phrase
from transformer_mt.decoding.search import Hypothesis, SearchModel, SearchOptions, run_search
from transformer_mt.decoding.strategy import Search, SearchCapabilities


@dataclass(frozen=True)
class PowerLength:
    """fairseq's length normalization: a finished hypothesis' log-probability is divided by
    length ** alpha (length: its tokens and EOS). alpha 0: none; 1: the average log-probability.
    Hugging Face's `length_penalty` is the same rule."""

    alpha: float = 1.0

    def __call__(self, length: int) -> float:
        return length ** self.alpha


@dataclass(frozen=True)
class GnmtLength:
    """GNMT's length penalty (Wu et al. 2016), which the Transformer paper used: the log-probability
    is divided by ((5 + length) / 6) ** alpha."""

    alpha: float = 0.6

    def __call__(self, length: int) -> float:
        return ((5 + length) / 6) ** self.alpha


@dataclass
class Finished:
    """The finished hypotheses of a batch, on the device, in the order they finished: sentence b's
    are slots 0 ... count[b] - 1 of its 2 x beam_size (slots beam_size ... are where candidates
    that do not finish are written, one per candidate, so that writes never collide)."""

    tokens: torch.Tensor  # (batch * 2k, max steps): the hypothesis' tokens (BOS and EOS excluded)
    length: torch.Tensor  # (batch * 2k,): how many of them
    logprob: torch.Tensor  # (batch * 2k,): sum of token log-probabilities, EOS included
    count: torch.Tensor  # (batch,): finished hypotheses of each sentence, at most k

    @classmethod
    def empty(cls, batch: int, k: int, steps: int, device: torch.device) -> "Finished":
        slots = batch * 2 * k
        return cls(torch.zeros(slots, steps, dtype=torch.long, device=device),
                   torch.zeros(slots, dtype=torch.long, device=device),
                   torch.zeros(slots, device=device), torch.zeros(batch, dtype=torch.long, device=device))


class BeamSearch(Search):
    """Keep the `beam_size` best prefixes of every sentence; all sentences advance together.

    Each step takes the 2 x beam_size best extensions of a sentence's beams. An extension ending
    in EOS that ranks among the first beam_size is finished: its score is
        sum of token log-probabilities (EOS included) / length_norm(length)
    with length = tokens including EOS (PowerLength, fairseq's, by default; GnmtLength is the
    paper's). The best beam_size extensions that do not end in EOS go on; finished hypotheses are
    never extended. A sentence stops when it has beam_size finished hypotheses (early stopping) and
    leaves the batch; the search ends when all have stopped. The length limits, EOS and n-gram
    rules, and how the model runs, are the `options` every search takes (SearchOptions). `nbest`
    best are returned. `prefix_tokens` (B, P), padded with <pad>: every hypothesis of a sentence
    starts with its row's (TargetPrefix: while it lasts, each beam has one extension, so only the
    first beam stays alive; the forced tokens' log-probabilities count in the score).

    The bookkeeping stays on the device (Finished); every `options.check_every` steps (None: 1 on the CPU,
    8 on a GPU; search.check_interval) one host sync decides which sentences go on, and the stopped
    ones leave the batch. In between, a stopped sentence rides along without changing its result
    (it has beam_size finished hypotheses, or no beam with a finite score): the search is the same
    at any check_every, though the batch's size between checks is not, and a model's arithmetic
    may round differently in a batch of another size (scores in the last bits, as any batching).
    """

    capabilities = SearchCapabilities(nbest=True, beams=True, constraints=True)

    def __init__(self, beam_size: int = 4, length_norm: Callable[[int], float] | None = None, nbest: int = 1,
                 options: SearchOptions | None = None, constraints: bool = False, shortlist: bool = False
                 ) -> None:
        self.beam_size, self.nbest = beam_size, nbest
        self.length_norm = length_norm or PowerLength()
        self.options = options or SearchOptions()
        self.constraints = constraints  # input lines carry constraints (source<TAB>phrase<TAB>...)
        self.shortlist = shortlist  # over a vocabulary shortlist (search.SHORTLIST)
        self.unmet = 0  # sentences whose constraints did not fit their length limit (decoded without)

    @torch.no_grad()
    def __call__(self, model: SearchModel, src: torch.Tensor, bos_id: int, eos_id: int,
                 prefix_tokens: torch.Tensor | None = None, constraints: list[list[Phrase]] | None = None,
                 free_prefix: int = 0) -> list[list[Hypothesis]]:
        """The nbest hypotheses of each source row; `constraints`: each row's phrases of target ids
        that every hypothesis must contain (constraints.py; rows without any decode as they would
        without the argument)."""
        rows = [i for i, c in enumerate(constraints or []) if c]
        constrained = set(rows)
        plain = [i for i in range(src.size(0)) if i not in constrained]
        out: list[list[Hypothesis]] = [[] for _ in range(src.size(0))]
        if plain:
            for i, hyps in zip(plain, self.unconstrained(model, src, bos_id, eos_id, prefix_tokens, plain,
                                                                free_prefix)):
                out[i] = hyps
        if rows:
            index = torch.tensor(rows, device=src.device)

            def begin(batch: int, steps: int, device: torch.device) -> ConstrainedBeamRun:
                return ConstrainedBeamRun(self, [constraints[i] for i in rows], steps, device, eos_id)

            found = run_search(model, src.index_select(0, index), bos_id, eos_id, self.options, begin,
                               beams=self.beam_size, prefix_tokens=None if prefix_tokens is None
                               else prefix_tokens.index_select(0, index), free_prefix=free_prefix)
            unmet = [i for i, hyps in zip(rows, found) if not hyps]
            self.unmet += len(unmet)
            for i, hyps in zip(rows, found):
                out[i] = hyps
            for i, hyps in zip(unmet, self.unconstrained(model, src, bos_id, eos_id, prefix_tokens, unmet,
                                                                 free_prefix)
                               if unmet else []):
                out[i] = hyps
        return out

    def unconstrained(self, model: SearchModel, src: torch.Tensor, bos_id: int, eos_id: int,
                      prefix_tokens: torch.Tensor | None, rows: list[int], free_prefix: int = 0
                      ) -> list[list[Hypothesis]]:
        """Beam search without constraints on the source rows `rows` (all of them: src as it is)."""
        if len(rows) < src.size(0):
            index = torch.tensor(rows, device=src.device)
            src = src.index_select(0, index)
            prefix_tokens = None if prefix_tokens is None else prefix_tokens.index_select(0, index)

        def begin(batch: int, steps: int, device: torch.device) -> "BeamRun":
            return BeamRun(self, batch, steps, device, eos_id)

        return run_search(model, src, bos_id, eos_id, self.options, begin, beams=self.beam_size,
                          prefix_tokens=prefix_tokens, free_prefix=free_prefix)


class BeamRun:
    """One call of beam search (a SearchRun): each sentence's beam scores and finished hypotheses,
    on the device; its groups are the sentences in the batch, `beam_size` prefixes each."""

    def __init__(self, search: BeamSearch, batch: int, steps: int, device: torch.device, eos_id: int) -> None:
        self.search, self.eos_id, self.k = search, eos_id, search.beam_size
        self.done = Finished.empty(batch, self.k, steps, device)
        self.sentence = torch.arange(batch, device=device)  # of each sentence in the batch
        self.scores = first_beam_only(batch, self.k, device).view(batch, self.k)  # the beams' scores

    def step(self, step: int, lprobs: torch.Tensor, prefix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The 2 x beam_size best extensions of each sentence's beams: those ending in EOS among the
        first beam_size finish; the beam_size best others carry on (where fewer are possible, the
        rest copy the best one with score -inf: dead beams)."""
        n, k, vocab = self.sentence.numel(), self.k, lprobs.size(1)
        candidates = lprobs.add_(self.scores.view(-1)[:, None]).view(n, k * vocab)  # in place: not needed again
        top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=1)
        top_beam, top_token = top_index // vocab, top_index % vocab
        self.finish(prefix, step, top_scores, top_beam, top_token == self.eos_id)
        open_scores = top_scores.masked_fill(top_token == self.eos_id, float("-inf"))
        next_scores, pick = open_scores.topk(k, dim=1)
        pick = torch.where(torch.isfinite(next_scores), pick, pick[:, :1])
        self.scores = next_scores
        rows = torch.arange(n, device=lprobs.device)[:, None] * k + top_beam.gather(1, pick)  # (n, k) prefix rows
        return rows, top_token.gather(1, pick)

    def going(self) -> torch.Tensor:
        """The sentences with fewer than beam_size finished hypotheses and a beam that can go on."""
        return (self.done.count.index_select(0, self.sentence) < self.k) & torch.isfinite(self.scores[:, 0])

    def select(self, keep: torch.Tensor) -> None:
        self.sentence, self.scores = self.sentence.index_select(0, keep), self.scores.index_select(0, keep)

    def finish(self, prefix: torch.Tensor, step: int, top_scores: torch.Tensor, top_beam: torch.Tensor,
               is_eos: torch.Tensor) -> None:
        """Record, on the device, the candidates (sentences in the batch x 2 beam_size) that end in
        EOS and rank among their sentence's first beam_size, in rank order, while it has fewer than
        beam_size finished hypotheses."""
        done, sentence, k = self.done, self.sentence, self.k
        n = sentence.numel()
        ends = is_eos[:, :k] & torch.isfinite(top_scores[:, :k])  # (n, k)
        count = done.count.index_select(0, sentence)
        slot = count[:, None] + ends.cumsum(dim=1) - 1  # the place in the sentence's list of each that ends
        spare = torch.arange(k, 2 * k, device=slot.device)  # candidate j's own slot when it does not finish
        slot = torch.where(ends & (slot < k), slot, spare)
        flat = (sentence[:, None] * 2 * k + slot).view(-1)
        done.count.index_copy_(0, sentence, (count + ends.sum(dim=1)).clamp(max=k))
        done.logprob.index_copy_(0, flat, top_scores[:, :k].reshape(-1))
        done.length.index_fill_(0, flat, step)
        if step:
            rows = (torch.arange(n, device=slot.device)[:, None] * k + top_beam[:, :k]).view(-1)
            done.tokens[:, :step].index_copy_(0, flat, prefix.index_select(0, rows)[:, 1:])

    def result(self) -> list[list[Hypothesis]]:
        """The nbest finished hypotheses of each sentence, best first (read from the device once); a
        sentence whose rules no hypothesis could meet gets one empty, impossible hypothesis. The
        score, logprob / length_norm(length + 1), is computed here in double precision."""
        empty = Hypothesis([], float("-inf"), float("-inf"))
        done, slots = self.done, 2 * self.k
        tokens, lengths, logprobs = done.tokens.tolist(), done.length.tolist(), done.logprob.tolist()
        out = []
        for b, count in enumerate(done.count.tolist()):
            hyps = []
            for i in range(b * slots, b * slots + count):
                score = logprobs[i] / self.search.length_norm(lengths[i] + 1)
                hyps.append(Hypothesis(tokens[i][: lengths[i]], score, logprobs[i]))
            out.append(sorted(hyps, key=lambda h: -h.score)[: self.search.nbest] or [empty])
        return out


def first_beam_only(batch: int, k: int, device: torch.device) -> torch.Tensor:
    """The scores (batch x k,) beam search starts from: all beams start equal, so only the first of
    each sentence is expanded (0), the others are not (-inf)."""
    scores = torch.zeros(batch, k, device=device)
    scores[:, 1:] = float("-inf")
    return scores.view(-1)
