"""What every search strategy shares: the model interface it needs (SearchModel), hypotheses, the
options every search takes (SearchOptions: the rules its outputs obey -- length limits, EOS,
padding, repeated n-grams, a forced target prefix -- and how it runs the model), the target
prefixes a search may be given (TargetPrefix), the decoder state that runs the model one step at
a time (with the KV cache, or by re-decoding the prefix for comparison), and the one decoding loop
(`run_search`) every search plugs its own step into (a SearchRun: TokenRun here for greedy search
and sampling, BeamRun in beam.py), as fairseq's search.py strategies plug into its
sequence_generator.

No search waits for the host at every step: what a step decides stays on the device, and the
searches look at it (which rows ended, which sentences stopped) every `check_every` steps, where
rows that have ended leave the batch. See `check_interval`."""

from dataclasses import dataclass
from typing import Any, Protocol

import torch


class SearchModel(Protocol):
    """What a search needs from a model; `transformer_mt.model.Transformer` is one, and so are the
    hand-built toy models of the tests."""

    config: Any  # .pad_id and .max_positions are read
    normalized: bool  # decode gives log-probabilities (an ensemble): taken as they are; False: logits
    fixed_rows: bool  # keeps every row of its batch to the end (static shapes): rows that ended ride along

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """(N, S) source ids -> memory."""

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor, cache: Any = None) -> torch.Tensor:
        """(N, T) prefixes -> logits (N, T, V), log-probabilities where `normalized`; with a cache
        that keeps what it decoded, T = 1 (the newest token). memory and src have N / beams rows,
        `beams` the cache's (no cache: 1): `beams` consecutive prefixes (the beams of a sentence)
        share one. Any other layout is a ValueError."""

    def init_cache(self, capacity: int | None = None, beams: int = 1, store: bool = True) -> "SearchCache":
        """An empty decode state: the layout (`beams` prefixes per memory row) and, with store,
        an incremental-decoding cache for up to `capacity` positions (None: any number)."""


class SearchCache(Protocol):
    """What a search needs from a model's cache (`transformer_mt.model.cache.DecoderCache` is one)."""

    def select(self, index: torch.Tensor, memory_index: torch.Tensor | None = None) -> None:
        """Keep the prefixes' rows `index` (beams move between rows) and the memory's rows
        `memory_index` (None: the memory's part stays), in place."""


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # the search's score: sum of token log-probabilities (EOS included), length-normalized by beam
    logprob: float  # sum of token log-probabilities, EOS included


CHECK_EVERY = 8  # steps between a search's looks at the host on a GPU

SHORTLIST = """decoding.shortlist, every search's (false by default): true decodes over a vocabulary shortlist,
per batch the candidates of its source tokens in the lexical table beside the checkpoint (python run.py
task=shortlist ckpt_path=CKPT builds it), the frequent target tokens and the special ones
(decoding/shortlist.py). A search only declares it; whoever loads the checkpoint reads the table."""


def check_interval(check_every: int | None, device: torch.device) -> int:
    """Steps between the looks at which rows ended: `check_every`, or by default 1 on the CPU (a
    look costs nothing there, and ended rows leave the batch at once) and CHECK_EVERY elsewhere (a
    look waits for the GPU's queue to drain; ended rows ride along, masked, until the next)."""
    if check_every is None:
        return 1 if device.type == "cpu" else CHECK_EVERY
    return check_every


def max_lengths(src: torch.Tensor, pad_id: int, a: float, b: int, max_positions: int) -> torch.Tensor:
    """Per-sentence limit on output tokens (EOS excluded): a * src_len + b, src_len counting the
    source EOS, kept inside the model's position table."""
    src_len = (src != pad_id).sum(dim=1)
    return (a * src_len + b).long().clamp(min=1, max=max_positions - 2)


@dataclass(frozen=True)
class TargetPrefix:
    """The tokens each output row must start with: a search's `prefix_tokens` argument (fairseq's
    name), (N, P) target ids padded at the end with <pad>, held as `tokens` with -1 after each
    row's prefix (nothing forced). The width P is a host int: the steps after it cost nothing, and a
    search without prefixes (P = 0) runs as it always did. A search keeps these rows in step with
    its own (`select`) and asks at each step which token each row must take (`at`); the rule itself
    is SearchOptions.apply's."""

    tokens: torch.Tensor  # (N, P), -1 where nothing is forced

    @classmethod
    def given(cls, prefix_tokens: torch.Tensor | None, rows: int, model: SearchModel,
              device: torch.device) -> "TargetPrefix":
        """The prefixes of `rows` source rows; None: none. Prefixes wider than the model's positions
        allow (max_positions - 2: BOS and EOS) are a ValueError."""
        if prefix_tokens is None:
            return cls(torch.empty(rows, 0, dtype=torch.long, device=device))
        pad_id, most = model.config.pad_id, model.config.max_positions - 2
        if prefix_tokens.dim() != 2 or prefix_tokens.size(0) != rows:
            raise ValueError(f"prefix_tokens: expected ({rows}, P) target ids, got {tuple(prefix_tokens.shape)}")
        if prefix_tokens.size(1) > most:
            raise ValueError(f"prefix_tokens: {prefix_tokens.size(1)} wide, more than the model's positions allow "
                             f"({most})")
        tokens = prefix_tokens.to(device=device, dtype=torch.long)
        return cls(tokens.masked_fill(tokens == pad_id, -1))

    @property
    def width(self) -> int:
        """The longest prefix (padded width): no row is forced at or after this step."""
        return self.tokens.size(1)

    def lengths(self) -> torch.Tensor:
        """(N,) the prefix length of each row."""
        return (self.tokens >= 0).sum(dim=1)

    def at(self, step: int, beams: int = 1) -> torch.Tensor | None:
        """The token each row must take at `step` (-1: none), each row repeated for its `beams`
        consecutive prefixes; None after the longest prefix."""
        if step >= self.width:
            return None
        return self.tokens[:, step, None].expand(-1, beams).reshape(-1)

    def select(self, index: torch.Tensor) -> "TargetPrefix":
        """The rows `index` (as a search's rows move: copies, rows that leave)."""
        return TargetPrefix(self.tokens.index_select(0, index))


@dataclass(frozen=True)
class SearchOptions:
    """What greedy search, beam search and sampling share (the config node `decoding.options`):

    - the rules every output obeys: at most max_len_a * src_len + max_len_b tokens (then EOS is
      forced, with its own probability), no EOS before min_len tokens, never <pad>, and with
      no_repeat_ngram_size > 0 no n-gram twice; a row given a target prefix (TargetPrefix) starts
      with it whatever these rules say, and its limit is at least the prefix's length;
    - how the model runs: use_cache (false: the whole prefix is decoded again at every step, for
      tests and benchmarks; the same outputs), check_every, the steps between the host's looks
      at which rows ended (None: the search's default; see check_interval), and static_step: a
      Translator's model decodes through the compiled step on static shapes (model/static_step.py;
      None: on a GPU, where it is captured as CUDA graphs, not on the CPU; see `static`).
    """

    max_len_a: float = 1.2
    max_len_b: int = 10
    min_len: int = 0
    no_repeat_ngram_size: int = 0
    use_cache: bool = True
    check_every: int | None = None
    static_step: bool | None = None

    def static(self, device: torch.device) -> bool:
        """Whether a model on `device` decodes through the static, compiled step: static_step, or
        by default on a GPU only. On a 2-core CPU it ran at 0.31x the eager step's speed (beam 4)
        and every new shape compiles for seconds; on a GPU the eager step waits on kernel launches.
        Without a cache (use_cache false) never."""
        wanted = device.type == "cuda" if self.static_step is None else self.static_step
        return wanted and self.use_cache

    def limits(self, model: SearchModel, src: torch.Tensor, forced: TargetPrefix | None = None) -> torch.Tensor:
        """The output length limit of each source row, raised to the length of its forced target
        prefix where that is longer (the prefix always fits; the model may then add nothing)."""
        limits = max_lengths(src, model.config.pad_id, self.max_len_a, self.max_len_b, model.config.max_positions)
        return limits if forced is None or not forced.width else torch.maximum(limits, forced.lengths())

    def apply(self, lprobs: torch.Tensor, prefix: torch.Tensor, step: int, at_limit: torch.Tensor | None,
              eos_id: int, pad_id: int, forced: torch.Tensor | None = None, free: bool = False) -> torch.Tensor:
        """lprobs (N, V) of the token after `prefix` (N, step + 1) with the rules applied; rows with
        at_limit (N,) True may only end (EOS keeps its probability). at_limit None: no row is at its
        limit (what a search knows on the host before the smallest limit, saving a pass over lprobs).
        forced (N,): the token each row must take at this step, -1 where none (TargetPrefix.at;
        None: no row is forced); it overrides every other rule and keeps the model's log-probability,
        so a forced prefix counts in the score as fairseq's prefix_tokens do; `free`: it counts 0 (a
        target language's code, as generate's forced_bos_token_id counts it)."""
        kept = None if forced is None else lprobs.gather(1, forced.clamp(min=0)[:, None])  # before the rules
        if free and kept is not None:
            kept = torch.zeros_like(kept)
        eos = lprobs[:, eos_id].clone()
        lprobs[:, pad_id] = float("-inf")
        lprobs = ban_repeated_ngrams(lprobs, prefix, self.no_repeat_ngram_size)
        if step < self.min_len:
            lprobs[:, eos_id] = float("-inf")
        if at_limit is not None:  # decided on the device: no host sync
            lprobs.masked_fill_(at_limit[:, None], float("-inf"))
            lprobs[:, eos_id] = torch.where(at_limit, eos, lprobs[:, eos_id])
        if forced is not None:
            only = torch.full_like(lprobs, float("-inf")).scatter_(1, forced.clamp(min=0)[:, None], kept)
            lprobs = torch.where((forced >= 0)[:, None], only, lprobs)
        return lprobs

    def at_limit(self, limits: torch.Tensor, step: int, first_limit: int) -> torch.Tensor | None:
        """The rows whose limit is reached at `step` (limits (N,)), or None before `first_limit`, the
        smallest limit of the search (a host int), when none can be."""
        return None if step < first_limit else step >= limits


class DecoderState:
    """Encodes a source batch once and returns next-token log-probabilities for growing prefixes.

    With use_cache, each step feeds only the newest token and K, V of earlier steps come from the
    model's cache; without it, the whole prefix is decoded again (for tests and benchmarks).
    `reorder(index, memory_index)` selects prefix rows of the cache and rows of the memory (None:
    the memory stays), in place. The prefixes come `beams` per memory row, consecutive (the
    beams of a sentence share its memory row); beams = 1: one prefix per memory row.
    """

    def __init__(self, model: SearchModel, src: torch.Tensor, use_cache: bool = True, beams: int = 1,
                 capacity: int | None = None) -> None:
        self.model, self.src, self.use_cache = model, src, use_cache
        self.memory = model.encode(src)
        self.cache = model.init_cache(capacity, beams, store=use_cache)  # capacity: the search's most steps

    def step(self, prefix: torch.Tensor) -> torch.Tensor:
        """prefix (N, t) starting with BOS -> log-probabilities (N, V) of token t+1, in fp32."""
        new = prefix[:, -1:] if self.use_cache else prefix  # without a kept cache, the whole prefix again
        logits = self.model.decode(new, self.memory, self.src, cache=self.cache)
        last = logits[:, -1].float()
        return last.contiguous() if self.model.normalized else last.log_softmax(dim=-1)

    def reorder(self, index: torch.Tensor, memory_index: torch.Tensor | None = None) -> None:
        if memory_index is not None:
            self.memory = self.memory.index_select(0, memory_index)
            self.src = self.src.index_select(0, memory_index)
        self.cache.select(index, memory_index)


def ban_repeated_ngrams(lprobs: torch.Tensor, prefix: torch.Tensor, n: int) -> torch.Tensor:
    """Set to -inf every token that would complete an n-gram already present in the prefix
    (BOS excluded); prefix (N, t), lprobs (N, V). On the device: the banned tokens are scattered
    into a mask, n-grams that do not match into a spare column V."""
    tokens = prefix[:, 1:]
    if n <= 0 or tokens.size(1) < n:
        return lprobs
    grams = tokens.unfold(1, n, 1)  # (N, t - n + 1, n)
    tail = tokens[:, tokens.size(1) - n + 1 :]  # the last n - 1 tokens
    match = (grams[:, :, : n - 1] == tail[:, None, :]).all(dim=-1)  # (N, t - n + 1)
    rows, vocab = lprobs.shape
    banned = grams[:, :, n - 1].masked_fill(~match, vocab)
    mask = torch.zeros(rows, vocab + 1, dtype=torch.bool, device=lprobs.device).scatter_(1, banned, True)
    return lprobs.masked_fill(mask[:, :vocab], float("-inf"))


class SearchRun(Protocol):
    """What one call of a search keeps while the loop (`run_search`) runs it: how it picks each
    step's tokens, and its results. Its rows come in groups, one per memory row: `beams`
    consecutive prefixes each (a sentence's beams; 1 for greedy search and sampling, whose groups
    are rows of their own)."""

    def step(self, step: int, lprobs: torch.Tensor, prefix: torch.Tensor
             ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """The next tokens (groups, beams), given lprobs (groups x beams, V) with the rules applied
        and the prefixes so far (groups x beams, step + 1), and the prefix row each extends
        (groups, beams); None: each row extends its own."""

    def going(self) -> torch.Tensor:
        """(groups,): on the device, which groups go on (at a check: the others leave the batch)."""

    def select(self, keep: torch.Tensor) -> None:
        """Only the groups `keep` go on."""

    def result(self) -> list[list[Hypothesis]]:
        """The hypotheses of each sentence (one group or `copies` of them), best first."""


def run_search(model: SearchModel, src: torch.Tensor, bos_id: int, eos_id: int, options: SearchOptions,
               begin, beams: int = 1, copies: int = 1, default_check_every: int | None = None,
               prefix_tokens: torch.Tensor | None = None, free_prefix: int = 0) -> list[list[Hypothesis]]:
    """The one decoding loop of every search (fairseq's sequence_generator shape, the strategies'
    own part a SearchRun): encode the sources once, then every step take the log-probabilities of
    the next token (options.apply's rules; while a row's `prefix_tokens` last, the forced token is
    its only choice: TargetPrefix; the first `free_prefix` of them count 0), let the run pick the
    tokens (`begin(groups, steps, device)` makes the run), and extend the prefixes, until every
    row's limit. Every `options.check_every` steps (check_interval; None: `default_check_every`, or
    check_interval's) the groups the run says are done leave the batch, so the model runs only on
    the others; in between they ride along without changing the result (a model with `fixed_rows`,
    on static shapes, keeps them all to the end). Each source is one group of `beams` prefixes, or
    `copies` groups in consecutive rows (its memory row copied too).

    Host syncs: one at the start (the limits), one per check (which groups go on), one at the end."""
    every = check_interval(default_check_every if options.check_every is None else options.check_every, src.device)
    forced = TargetPrefix.given(prefix_tokens, src.size(0), model, src.device)
    limits = options.limits(model, src, forced)
    longest, first_limit = torch.stack([limits.max(), limits.min()]).tolist()
    steps = longest + 1  # rules force EOS at each row's limit: every row ends within `steps`
    state = DecoderState(model, src, options.use_cache, beams=beams, capacity=steps)
    fixed = model.fixed_rows  # a model on static shapes (model/static_step.py)
    if copies > 1:
        rows = torch.arange(src.size(0), device=src.device)[:, None].expand(-1, copies).reshape(-1)
        state.reorder(rows, rows)
        limits, forced = limits.index_select(0, rows), forced.select(rows)
    run: SearchRun = begin(limits.numel(), steps, src.device)
    prefix = torch.full((limits.numel() * beams, 1), bos_id, dtype=torch.long, device=src.device)
    for step in range(steps):
        at_limit = options.at_limit(limits, step, first_limit)
        lprobs = options.apply(state.step(prefix), prefix, step, each_prefix(at_limit, beams), eos_id,
                               model.config.pad_id, forced.at(step, beams), free=step < free_prefix)
        rows, tokens = run.step(step, lprobs, prefix)
        keep = None
        if (step + 1) % every == 0:
            keep = run.going().nonzero().squeeze(1)  # the check's host sync
            if keep.numel() == 0:
                break
            if keep.numel() == limits.numel() or fixed:  # fixed rows: the others ride along to the end
                keep = None
            else:
                rows, tokens, limits, forced = kept(keep, beams, rows, tokens, limits, forced)
                run.select(keep)
        if rows is None:
            prefix = torch.cat([prefix, tokens.view(-1, 1)], dim=1)
            continue
        rows = rows.reshape(-1)
        prefix = torch.cat([prefix.index_select(0, rows), tokens.view(-1, 1)], dim=1)
        state.reorder(rows, keep)  # the memory changes only when groups leave
    return run.result()


def each_prefix(at_limit: torch.Tensor | None, beams: int) -> torch.Tensor | None:
    """A group's flag (groups,) for each of its `beams` prefixes (groups x beams,)."""
    return at_limit if at_limit is None or beams == 1 else at_limit[:, None].expand(-1, beams).reshape(-1)


def kept(keep: torch.Tensor, beams: int, rows: torch.Tensor | None, tokens: torch.Tensor, limits: torch.Tensor,
         forced: TargetPrefix) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, TargetPrefix]:
    """The groups `keep` of a step's prefix rows (None, each row its own: the kept groups' rows),
    tokens, limits and target prefixes."""
    if rows is None:
        rows = keep[:, None] * beams + torch.arange(beams, device=keep.device)
    else:
        rows = rows.index_select(0, keep)
    return rows, tokens.index_select(0, keep), limits.index_select(0, keep), forced.select(keep)


class TokenRun:
    """One call of a search that extends every row by one token of its own (greedy search,
    sampling: `pick(lprobs)` chooses it): each row's tokens and score (the sum of its tokens'
    log-probabilities, EOS included), and whether it has ended (picked EOS; what it picks after is
    never read). The groups are single rows; `copies` consecutive ones make a sentence's samples."""

    def __init__(self, rows: int, steps: int, device: torch.device, pick, eos_id: int, copies: int = 1) -> None:
        self.pick, self.eos_id, self.copies = pick, eos_id, copies
        self.out = torch.full((rows, steps), eos_id, dtype=torch.long, device=device)  # each row's tokens, then EOS
        self.scores = torch.zeros(rows, device=device)
        self.alive = torch.arange(rows, device=device)  # the rows of the batch, in the order of `out`
        self.ended = torch.zeros(rows, dtype=torch.bool, device=device)  # rows of the batch that picked EOS

    def step(self, step: int, lprobs: torch.Tensor, prefix: torch.Tensor) -> tuple[None, torch.Tensor]:
        token = self.pick(lprobs)
        gained = lprobs.gather(1, token[:, None]).squeeze(1).masked_fill(self.ended, 0.0)  # ended rows gain nothing
        self.scores.index_add_(0, self.alive, gained)
        self.out[:, step].index_copy_(0, self.alive, token)
        self.ended |= token == self.eos_id
        return None, token[:, None]

    def going(self) -> torch.Tensor:
        return ~self.ended

    def select(self, keep: torch.Tensor) -> None:
        self.alive, self.ended = self.alive.index_select(0, keep), self.ended.index_select(0, keep)

    def result(self) -> list[list[Hypothesis]]:
        """Each sentence's `copies` hypotheses, best first."""
        hyps = [Hypothesis(row[: row.index(self.eos_id)], score, score)
                for row, score in zip(self.out.tolist(), self.scores.tolist())]
        n = self.copies
        return [sorted(hyps[i : i + n], key=lambda h: -h.score) for i in range(0, len(hyps), n)]
