"""Lexically constrained beam search: every finished hypothesis contains every constraint, a phrase
of target tokens (Post & Vilar 2018's dynamic beam allocation, as fairseq's
LexicallyConstrainedBeamSearch and sockeye implement it).

Each beam carries how far it is through its sentence's constraints (`Progress`: which are met, and
the phrase it is inside, if any). At each step the candidates are the 2 x beam_size best extensions
of the sentence's beams (as unconstrained beam search takes them), each beam's own best token, and
each beam's next constraint token(s): the next token of the phrase it is inside, or the first
token of every unmet one. A candidate that leaves a phrase unfinished loses that phrase's progress.
Candidates are grouped in banks by the constraint tokens they have met, and the beam_size places go
to the banks in turn, best bank first, the best candidates of each, so that hypotheses that
advanced through the constraints survive beside cheaper ones that did not. EOS is never added as a
candidate: a beam that met every constraint finishes when EOS is among its sentence's 2 x beam_size
best extensions or its own best, and ranks among the beam_size best of the full bank; the EOS of a
beam that has not met them all is dropped. A sentence stops with beam_size finished hypotheses or when no beam can go
on. A sentence for which none finished (its constraints do not fit in its length limit) gets no
hypothesis here: BeamSearch then decodes it without constraints and counts it.

The selection runs on the host, one sentence at a time (the candidates' scores are read once a
step); the model's steps are the beam search's own."""

from dataclasses import dataclass

import torch

from transformer_mt.decoding.search import Hypothesis

Phrase = tuple[int, ...]


State = tuple[int, tuple[int, int] | None]  # (the met phrases as a bit mask, (phrase, tokens taken) or None)


@dataclass(frozen=True)
class Progress:
    """Where a hypothesis may be in its sentence's constraints: every way its tokens can be read as
    phrases met and a phrase begun (a set of states: a token that starts a phrase may also be a
    token like any other, "b a b" meets both "b" and "b a"). Phrases are matched in full: one left
    unfinished counts for nothing."""

    states: frozenset[State]
    constraints: tuple[Phrase, ...]

    @classmethod
    def start(cls, constraints: list[Phrase]) -> "Progress":
        return cls(frozenset({(0, None)}), tuple(constraints))

    def met_tokens(self, state: State) -> int:
        mask, inside = state
        done = sum(len(c) for j, c in enumerate(self.constraints) if mask >> j & 1)
        return done + (inside[1] if inside else 0)

    def tokens(self) -> int:
        """Constraint tokens met so far, the best reading's: the bank of the hypothesis."""
        return max(map(self.met_tokens, self.states))

    def complete(self) -> bool:
        full = (1 << len(self.constraints)) - 1
        return (full, None) in self.states

    def wanted(self) -> set[int]:
        """The tokens that advance through the constraints from here."""
        found = set()
        for mask, inside in self.states:
            if inside is not None:
                found.add(self.constraints[inside[0]][inside[1]])
            found.update(c[0] for j, c in enumerate(self.constraints) if not mask >> j & 1)
        return found

    def after(self, token: int) -> "Progress":
        """The progress of this hypothesis extended by `token`."""
        states = set()
        for mask, inside in self.states:
            states.add((mask, None))  # the token as any other (a phrase begun is left unfinished)
            if inside is not None and self.constraints[inside[0]][inside[1]] == token:
                states.add(self.advanced(mask, inside[0], inside[1] + 1))
            for j, c in enumerate(self.constraints):
                if not mask >> j & 1 and c[0] == token:
                    states.add(self.advanced(mask, j, 1))
        return Progress(frozenset(states), self.constraints)

    def advanced(self, mask: int, j: int, taken: int) -> State:
        return (mask, (j, taken)) if taken < len(self.constraints[j]) else (mask | 1 << j, None)


@dataclass
class Sentence:
    """One sentence's constraints, its beams' progress and its finished hypotheses."""

    constraints: list[Phrase]
    progress: list[Progress]
    finished: list[tuple[list[int], float]]  # (tokens, log-probability with EOS)
    alive: bool = True


class ConstrainedBeamRun:
    """One call of constrained beam search (a SearchRun, as beam.BeamRun): the beams' scores on the
    device, their progress and the finished hypotheses on the host."""

    def __init__(self, search, constraints: list[list[Phrase]], steps: int, device: torch.device,
                 eos_id: int) -> None:
        self.search, self.eos_id, self.k = search, eos_id, search.beam_size
        self.sentences = [Sentence(list(c), [Progress.start(c)] * self.k, []) for c in constraints]
        self.batch = list(range(len(constraints)))  # the sentences in the batch, in order
        scores = torch.full((len(constraints), self.k), float("-inf"))
        scores[:, 0] = 0.0
        self.scores = scores.to(device)

    def step(self, step: int, lprobs: torch.Tensor, prefix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n, k, vocab = len(self.batch), self.k, lprobs.size(1)
        totals = lprobs.add_(self.scores.view(-1)[:, None])  # (n k, V)
        top_scores, top_index = totals.view(n, k * vocab).topk(min(2 * k, k * vocab), dim=1)
        own_scores, own_tokens = totals.max(dim=1)
        extra = [sorted(self.sentences[s].progress[b].wanted() or {self.eos_id}) for s in self.batch for b in range(k)]
        width = max(map(len, extra))
        extra_tokens = torch.tensor([e + [e[0]] * (width - len(e)) for e in extra], device=lprobs.device)
        extra_scores = totals.gather(1, extra_tokens)
        host = [t.tolist() for t in (top_scores, top_index, own_scores, own_tokens, extra_scores, extra_tokens)]
        rows, tokens, scores = [], [], []
        for i, s in enumerate(self.batch):
            candidates = self.candidates(i, host, vocab)
            picked = self.choose(self.sentences[s], candidates, prefix, i, step)
            rows.append([i * k + b for b, _, _ in picked])
            tokens.append([t for _, t, _ in picked])
            scores.append([score for _, _, score in picked])
        device = lprobs.device
        self.scores = torch.tensor(scores, device=device)
        return torch.tensor(rows, device=device), torch.tensor(tokens, device=device)

    def candidates(self, i: int, host: list, vocab: int) -> dict[tuple[int, int], float]:
        """Sentence i's candidate extensions (beam, token) -> score."""
        top_scores, top_index, own_scores, own_tokens, extra_scores, extra_tokens = host
        k = self.k
        found = {(index // vocab, index % vocab): score for score, index in zip(top_scores[i], top_index[i])}
        for b in range(k):
            found[(b, own_tokens[i * k + b])] = own_scores[i * k + b]
            for score, token in zip(extra_scores[i * k + b], extra_tokens[i * k + b]):
                found[(b, token)] = score
        return {key: score for key, score in found.items() if score > float("-inf")}  # NaN: a dead beam

    def choose(self, sentence: Sentence, candidates: dict, prefix: torch.Tensor, i: int, step: int) -> list:
        """Finish the complete EOS candidates that rank among the full bank's beam_size best, and pick
        the beam_size beams that go on, the banks in turn; (beam, token, score) each."""
        k, constraints, total = self.k, sentence.constraints, sum(map(len, sentence.constraints))
        if not sentence.alive:  # stopped, riding along until the loop's next look: nothing changes
            return [(0, self.eos_id, float("-inf"))] * k
        banks: dict[int, list] = {}
        for (b, token), score in sorted(candidates.items(), key=lambda item: -item[1]):
            before = sentence.progress[b]
            if token == self.eos_id:
                if before.complete():
                    banks.setdefault(total, []).append((b, token, score, None))
                continue
            after = before.after(token)
            banks.setdefault(after.tokens(), []).append((b, token, score, after))
        full = banks.get(total, [])[:k]
        for b, _, score, progress in full:
            if progress is None and len(sentence.finished) < k:
                sentence.finished.append((prefix[i * k + b, 1:].tolist(), score))
        banks[total] = [c for c in banks.get(total, []) if c[3] is not None]
        picked = self.allocate(banks)
        if len(sentence.finished) >= k or not picked:
            sentence.alive = False
        sentence.progress = [p for _, _, _, p in picked] + [Progress.start(constraints)] * (k - len(picked))
        filler = (picked[0][0], picked[0][1]) if picked else (0, self.eos_id)  # dead beams copy the best
        dead = [(*filler, float("-inf"))] * (k - len(picked))
        return [(b, token, score) for b, token, score, _ in picked] + dead

    def allocate(self, banks: dict[int, list]) -> list:
        """Up to beam_size candidates: in turns, the best left of each bank, the fullest bank first."""
        order, picked, turn = sorted(banks, reverse=True), [], 0
        while len(picked) < self.k and any(turn < len(banks[b]) for b in order):
            for bank in order:
                if turn < len(banks[bank]) and len(picked) < self.k:
                    picked.append(banks[bank][turn])
            turn += 1
        return sorted(picked, key=lambda c: -c[2])

    def going(self) -> torch.Tensor:
        return torch.tensor([self.sentences[s].alive for s in self.batch], device=self.scores.device)

    def select(self, keep: torch.Tensor) -> None:
        index = keep.tolist()
        self.batch = [self.batch[i] for i in index]
        self.scores = self.scores.index_select(0, keep)

    def result(self) -> list[list[Hypothesis]]:
        """Each sentence's nbest finished hypotheses, best first ([]: none met the constraints)."""
        out = []
        for sentence in self.sentences:
            hyps = [Hypothesis(tokens, logprob / self.search.length_norm(len(tokens) + 1), logprob)
                    for tokens, logprob in sentence.finished]
            out.append(sorted(hyps, key=lambda h: -h.score)[: self.search.nbest])
        return out
