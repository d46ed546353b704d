"""Greedy search over a running batch (iteration-level batching, as Orca and vLLM schedule LLM
decoding): rows join the batch between any two steps and leave it the step they end, each at its
own position, so a sentence that arrives while others decode starts at the next step instead of
waiting for the whole batch to end.

    running = RunningBatch(model, options, bos_id, eos_id)
    running.admit(sources, owners)        # encoded now; decoded from the next step on
    for owner, hypothesis in running.step():   # the rows that ended at this step
        ...

Each row keeps its own self-attention positions in buffers shared by the batch (rows, capacity,
heads, d_k): a row's newest keys and values are written at its own length, and it attends to its
first `length` positions only (a mask), its embeddings at its own positions; the encoder memory's
projected keys and values are kept per row, as wide as the widest source, padding masked. What a
row computes is what greedy search (greedy.py) computes for it, in any batch: the same model, the
same rules (SearchOptions: length limits, min_len, never <pad>), to rounding (the masked
positions add nothing). Models whose positions live in the embeddings (sinusoids, a learned
table) decode so; rotary and relative positions, target prefixes and the n-gram ban do not
(`RunningBatch.takes`)."""

from collections.abc import Hashable

import torch
import torch.nn.functional as F

from transformer_mt.decoding.search import Hypothesis, SearchOptions, max_lengths
from transformer_mt.model.cache import CrossAttentionCache, LayerCache
from transformer_mt.model.embedding import PositionTable


class RowPositions:
    """One decoder layer's self-attention keys and values of a running batch (model/cache.py's
    KeyValueCache): each row's at its own positions, `lengths` (rows,) of them filled."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, lengths: torch.Tensor, visible: torch.Tensor,
                 width: int) -> None:
        self.keys, self.values, self.lengths, self.mask, self.width = keys, values, lengths, visible, width

    def positions(self, count: int, device: torch.device) -> torch.Tensor:
        return self.lengths

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """This step's (rows, H, 1, d_k) written at each row's length; the first `width` positions."""
        rows = torch.arange(k.size(0), device=k.device)
        self.keys[rows, self.lengths] = k[:, :, 0]
        self.values[rows, self.lengths] = v[:, :, 0]
        return self.keys[:, : self.width].transpose(1, 2), self.values[:, : self.width].transpose(1, 2)

    def visible(self, mask: torch.Tensor | None) -> torch.Tensor:
        return self.mask


class RunningBatch:
    """Greedy decoding of rows that join and leave between steps; `owners` say whose each row is.

    The rows live in slots: buffers of every slot's self-attention keys and values (slots,
    capacity, H, d_k) and memory keys and values (slots, H, width, d_k), grown by doubling and
    written in place, so a row that joins fills a free slot and one that leaves frees its own:
    nothing is copied at a step. Free slots ride along (computed, never read) until they are a
    majority, when the buffers are compacted to the rows in them."""

    def __init__(self, model, options: SearchOptions, bos_id: int, eos_id: int) -> None:
        self.model, self.options, self.bos_id, self.eos_id = model, options, bos_id, eos_id
        self.pad_id, self.layers = model.config.pad_id, len(model.decoder_layers)
        self.device = next(model.parameters()).device
        self.owners: list[Hashable | None] = []  # each slot's row's owner (None: a free slot)
        self.tokens: list[list[int]] = []  # each slot's output so far
        self.last = self.slot_tensor(torch.long)  # each slot's newest token
        self.lengths = self.slot_tensor(torch.long)  # positions decoded: the newest token's position
        self.limits = self.slot_tensor(torch.long)  # most output tokens, EOS aside
        self.scores = self.slot_tensor(torch.float)
        self.active = self.slot_tensor(torch.long)  # 1 where a slot holds a row
        self.keys: list[torch.Tensor] = []  # per layer (slots, capacity, H, d_k)
        self.values: list[torch.Tensor] = []
        self.memory: list[list[torch.Tensor]] = []  # per layer [K, V], each (slots, H, width, d_k)
        self.memory_mask = torch.zeros(0, 1, 1, 1, dtype=torch.bool, device=self.device)

    def slot_tensor(self, dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(0, dtype=dtype, device=self.device)

    @staticmethod
    def takes(model, options: SearchOptions) -> bool:
        """Whether `model` with `options` decodes in a running batch: one Transformer whose positions
        are added to the embeddings (no rotary or relative ones), with the KV cache and no n-gram ban."""
        return (isinstance(getattr(model, "tgt_pos", None), PositionTable) and options.use_cache
                and options.no_repeat_ngram_size == 0)

    @property
    def rows(self) -> int:
        return sum(owner is not None for owner in self.owners)

    @torch.no_grad()
    def admit(self, sources: list[list[int]], owners: list[Hashable]) -> None:
        """Rows for `sources` (ids, EOS last), each decoded from BOS at the next step."""
        n = len(sources)
        if not n:
            return
        src = torch.full((n, max(map(len, sources))), self.pad_id, dtype=torch.long)
        for i, ids in enumerate(sources):
            src[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        src = src.to(self.device)
        memory = self.model.encode(src)
        projected = [layer.cross_attn.project_memory(memory) for layer in self.model.decoder_layers]
        limits = max_lengths(src, self.pad_id, self.options.max_len_a, self.options.max_len_b,
                             self.model.config.max_positions)
        free = [i for i, owner in enumerate(self.owners) if owner is None]
        if len(free) < n:
            free += self.grow(n - len(free), projected[0][0])
        slots = free[:n]
        self.widen(src.size(1), int(limits.max()) + 1)
        place = torch.tensor(slots, dtype=torch.long, device=self.device)
        width = src.size(1)
        for (k, v), (new_k, new_v) in zip(self.memory, projected):
            k[place, :, :width], v[place, :, :width] = new_k, new_v
        self.memory_mask[place] = False
        self.memory_mask[place, ..., :width] = self.model.padding_mask(src)
        self.last[place], self.lengths[place], self.limits[place], self.scores[place] = self.bos_id, 0, limits, 0.0
        self.active[place] = 1
        for slot, owner in zip(slots, owners):
            self.owners[slot], self.tokens[slot] = owner, []

    def grow(self, more: int, like: torch.Tensor) -> list[int]:
        """At least `more` new free slots (the slots doubled, at least); their numbers."""
        old = len(self.owners)
        added = max(more, old)
        heads, d_k = like.size(1), like.size(3)
        capacity = self.keys[0].size(1) if self.keys else 1
        width = self.memory_mask.size(-1)

        def more_rows(t: torch.Tensor) -> torch.Tensor:
            return torch.cat([t, t.new_zeros(added, *t.shape[1:])])

        if not self.keys:
            self.keys = [like.new_zeros(0, capacity, heads, d_k) for _ in range(self.layers)]
            self.values = [like.new_zeros(0, capacity, heads, d_k) for _ in range(self.layers)]
            self.memory = [[like.new_zeros(0, heads, width, d_k) for _ in range(2)] for _ in range(self.layers)]
        self.keys, self.values = [more_rows(t) for t in self.keys], [more_rows(t) for t in self.values]
        self.memory = [[more_rows(k), more_rows(v)] for k, v in self.memory]
        self.memory_mask = more_rows(self.memory_mask)
        self.memory_mask[old:, ..., 0] = True  # a free slot attends somewhere: no NaN rides along
        self.last, self.lengths, self.limits, self.scores, self.active = (more_rows(t) for t in (
            self.last, self.lengths, self.limits, self.scores, self.active))
        self.owners += [None] * added
        self.tokens += [[] for _ in range(added)]
        return list(range(old, old + added))

    def widen(self, width: int, capacity: int) -> None:
        """Memory buffers at least `width` wide and self-attention ones of at least `capacity` positions."""
        if width > self.memory_mask.size(-1):
            pad = width - self.memory_mask.size(-1)
            self.memory = [[F.pad(t, (0, 0, 0, pad)) for t in kv] for kv in self.memory]
            self.memory_mask = F.pad(self.memory_mask, (0, pad))
        if capacity > self.keys[0].size(1):
            pad = capacity - self.keys[0].size(1)
            self.keys = [F.pad(t, (0, 0, 0, 0, 0, pad)) for t in self.keys]
            self.values = [F.pad(t, (0, 0, 0, 0, 0, pad)) for t in self.values]

    @torch.no_grad()
    def step(self) -> list[tuple[Hashable, Hypothesis]]:
        """One token for every row; the rows that ended (picked EOS, or at their limit) leave the
        batch: their owners and hypotheses."""
        if not self.rows:
            return []
        width = int(self.lengths.max()) + 1
        visible = (torch.arange(width, device=self.device)[None] <= self.lengths[:, None])[:, None, None]
        caches = [LayerCache(RowPositions(k, v, self.lengths, visible, width),
                             CrossAttentionCache(1, keys=mk, values=mv))
                  for k, v, (mk, mv) in zip(self.keys, self.values, self.memory)]
        x = self.model.tgt_pos.add(self.model.tgt_embed(self.last[:, None]), self.lengths[:, None])
        states = self.model.decoder_stack(self.model.embed_dropout(x), None, self.memory_mask, caches)
        lprobs = self.model.output_proj(states)[:, -1].float().log_softmax(dim=-1)
        token = self.picked(lprobs)
        self.scores += lprobs.gather(1, token[:, None]).squeeze(1)
        self.lengths += self.active  # a free slot stays at position 0
        self.last = token
        ended = []
        for slot, (owner, picked) in enumerate(zip(self.owners, token.tolist())):
            if owner is None:
                continue
            if picked == self.eos_id:
                ended.append(slot)
            else:
                self.tokens[slot].append(picked)
        return self.leave(ended)

    def picked(self, lprobs: torch.Tensor) -> torch.Tensor:
        """Each row's token by greedy search's rules: never <pad>, no EOS before min_len, only EOS
        at the row's limit (it keeps its own probability)."""
        eos = lprobs[:, self.eos_id].clone()
        lprobs[:, self.pad_id] = float("-inf")
        lprobs[:, self.eos_id] = torch.where(self.lengths < self.options.min_len, float("-inf"), lprobs[:, self.eos_id])
        at_limit = self.lengths >= self.limits
        if bool(at_limit.any()):  # a look at the host: on a CPU, cheaper than a pass over every row's lprobs
            lprobs.masked_fill_(at_limit[:, None], float("-inf"))
            lprobs[:, self.eos_id] = torch.where(at_limit, eos, lprobs[:, self.eos_id])
        return lprobs.argmax(-1)

    def leave(self, ended: list[int]) -> list[tuple[Hashable, Hypothesis]]:
        """The rows in slots `ended` out of the batch, as (owner, hypothesis); their slots freed (a
        free slot decodes from position 0 again, never read), the buffers compacted where most are free."""
        out = [(self.owners[i], Hypothesis(self.tokens[i], float(self.scores[i]), float(self.scores[i])))
               for i in ended]
        if ended:
            gone = torch.tensor(ended, dtype=torch.long, device=self.device)
            self.lengths[gone], self.last[gone], self.limits[gone], self.active[gone] = 0, self.bos_id, 0, 0
        for i in ended:
            self.owners[i], self.tokens[i] = None, []
        if len(self.owners) > 8 and 2 * self.rows < len(self.owners):
            self.compact()
        return out

    def compact(self) -> None:
        """The buffers cut to the slots in use."""
        keep = torch.tensor([i for i, owner in enumerate(self.owners) if owner is not None], dtype=torch.long,
                            device=self.device)
        self.owners = [self.owners[i] for i in keep.tolist()]
        self.tokens = [self.tokens[i] for i in keep.tolist()]
        self.last, self.lengths, self.limits, self.scores, self.active = (t.index_select(0, keep) for t in (
            self.last, self.lengths, self.limits, self.scores, self.active))
        self.keys = [t.index_select(0, keep) for t in self.keys]
        self.values = [t.index_select(0, keep) for t in self.values]
        self.memory = [[t.index_select(0, keep) for t in kv] for kv in self.memory]
        self.memory_mask = self.memory_mask.index_select(0, keep)
