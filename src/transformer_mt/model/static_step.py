"""The decoder step on fixed shapes, compiled once per shape: DESIGN's fast path for decoding, with
the model's own `decode` (a cache that grows) as the exact reference.

    model = StaticDecoder(transformer)        # a SearchModel: encode, decode, init_cache
    hyps = BeamSearch(4)(model, src, bos_id, eos_id)

As Hugging Face's static cache with `torch.compile`: the self-attention keys and values live in
buffers preallocated for the batch's most output steps (rounded up to a power of two, at least
SMALLEST), the encoder memory's projected keys and values in buffers as wide as the source (rounded
up alike), and
the position in a (1,) tensor, so every step of a batch has the same shapes and the same inputs:
the step is compiled once per shape (`torch.compile(dynamic=False)`; on a GPU with
`mode="reduce-overhead"`, one CUDA graph per shape, replayed at every step). Each step attends to
every position of its buffers, the unfilled ones masked. The rows of a batch stay in it to the
end (`fixed_rows`: a search lets rows that ended ride along rather than leave the batch, which
would change the shapes); beams move between rows in place.

The buffers are an nn.Module's (StaticBuffers), so a CUDA graph reads them at fixed addresses; one
set per shape is kept and reused by every batch of that shape."""

import torch
from torch import nn

from transformer_mt.model.cache import CrossAttentionCache, LayerCache

SMALLEST = 16  # output capacity and source width are rounded up to a power of two, at least this


def rounded(n: int) -> int:
    """n rounded up to a power of two, at least SMALLEST: few shapes, few compilations. torch.compile
    compiles a function for at most 8 shapes (its recompile limit); a batch of a ninth shape runs
    the same step uncompiled (the same outputs, slower)."""
    return max(SMALLEST, 1 << (n - 1).bit_length())


class StaticBuffers(nn.Module):
    """What the step of one shape reads and writes: the self-attention keys and values of every
    decoder layer (layers, rows, capacity, heads, d_k), the memory's (layers, memory rows, heads,
    source, d_k) with its padding mask, and the position."""

    def __init__(self, model: nn.Module, rows: int, memory_rows: int, capacity: int, source: int,
                 dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        c, layers = model.config, len(model.decoder_layers)
        for name, shape in (("keys", (layers, rows, capacity, c.heads, c.d_k)),
                            ("memory_keys", (layers, memory_rows, c.heads, source, c.d_k))):
            self.register_buffer(name, torch.zeros(shape, dtype=dtype, device=device), persistent=False)
            self.register_buffer(name.replace("keys", "values"), torch.zeros(shape, dtype=dtype, device=device),
                                 persistent=False)
        self.register_buffer("memory_mask", torch.zeros(memory_rows, 1, 1, source, dtype=torch.bool, device=device),
                             persistent=False)
        self.register_buffer("position", torch.zeros(1, dtype=torch.long, device=device), persistent=False)

    @torch.no_grad()
    def start(self, model: nn.Module, memory_kv: list[tuple[torch.Tensor, torch.Tensor]], src: torch.Tensor) -> None:
        """A new batch: each layer's projected memory K, V (memory rows, heads, width, d_k) copied
        into the buffers (zero beyond its width), its padding mask, position 0. The self-attention
        buffers keep what they held: positions not yet written are masked."""
        width = src.size(1)
        self.memory_keys.zero_()
        self.memory_values.zero_()
        for i, (k, v) in enumerate(memory_kv):
            self.memory_keys[i, :, :, :width] = k
            self.memory_values[i, :, :, :width] = v
        self.memory_mask.zero_()
        self.memory_mask[..., :width] = model.padding_mask(src)
        self.position.zero_()


class StaticSelfAttention:
    """Decoder layer `layer`'s self-attention cache on the static buffers (model/cache.py's
    KeyValueCache): this step's K, V written at `buffers.position` of the layer's (rows, capacity,
    H, d_k) buffers, in place; every position of them attended to, `valid` (1, 1, 1, capacity)
    saying which are filled."""

    def __init__(self, buffers: StaticBuffers, layer: int, valid: torch.Tensor) -> None:
        self.buffers, self.layer, self.valid = buffers, layer, valid

    def positions(self, count: int, device: torch.device) -> torch.Tensor:
        return self.buffers.position

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.buffers.keys[self.layer], self.buffers.values[self.layer]
        keys.index_copy_(1, self.buffers.position, k.transpose(1, 2))
        values.index_copy_(1, self.buffers.position, v.transpose(1, 2))
        return keys.transpose(1, 2), values.transpose(1, 2)

    def visible(self, mask: torch.Tensor | None) -> torch.Tensor:
        return self.valid


def layer_caches(buffers: StaticBuffers, beams: int) -> list[LayerCache]:
    """Each decoder layer's cache on the buffers, at `buffers.position`: its self-attention's, and the
    memory's keys and values (`beams` rows per memory row)."""
    valid = (torch.arange(buffers.keys.size(2), device=buffers.position.device) <= buffers.position)[None, None, None]
    return [LayerCache(StaticSelfAttention(buffers, i, valid),
                       CrossAttentionCache(beams, keys=buffers.memory_keys[i], values=buffers.memory_values[i]))
            for i in range(buffers.keys.size(0))]


def decoder_step(model: nn.Module, buffers: StaticBuffers, token: torch.Tensor, beams: int) -> torch.Tensor:
    """The logits (rows, 1, V) after each row's newest token (rows, 1), at `buffers.position`,
    which moves on by one: the model's own decoder walk (`decoder_stack`), on the static buffers."""
    x = model.embed_dropout(model.tgt_pos.at(model.tgt_embed(token), buffers.position))
    states = model.decoder_stack(x, None, buffers.memory_mask, layer_caches(buffers, beams))
    buffers.position.add_(1)
    return model.output_proj(states)


class StaticState:
    """A search's decode state on a StaticDecoder (a SearchCache): the layout (`beams` rows per
    memory row), the most steps, the buffers (set at the first step) and how many positions are
    filled (a Python int)."""

    def __init__(self, capacity: int, beams: int) -> None:
        self.capacity, self.beams, self.length = capacity, beams, 0
        self.buffers: StaticBuffers | None = None

    @torch.no_grad()
    def select(self, index: torch.Tensor, memory_index: torch.Tensor | None = None) -> None:
        """Rows `index` of the filled positions, in place. Before the first step nothing is kept
        (the memory's rows are the search's); after it the memory's rows stay, and a `memory_index`
        is a ValueError."""
        if self.buffers is None:
            return
        if memory_index is not None:
            raise ValueError("a static decoder keeps every row of its batch (fixed_rows): its memory rows "
                             "cannot change")
        n = self.length
        for buffer in (self.buffers.keys, self.buffers.values):
            buffer[:, :, :n] = buffer[:, :, :n].index_select(1, index)


class StaticDecoder:
    """A Transformer searched through `decoder_step` on static buffers, compiled once per shape
    (mode: torch.compile's, "reduce-overhead" for CUDA graphs; backend: torch.compile's). Its
    `decode` gives the logits the model's own would, to rounding; `fixed_rows`: a search keeps
    every row of a batch until the last ends."""

    normalized = False
    fixed_rows = True

    def __init__(self, model: nn.Module, mode: str | None = None, backend: str | object = "inductor") -> None:
        self.model, self.config, self.mode = model, model.config, mode
        self.step = torch.compile(decoder_step, dynamic=False, mode=mode, backend=backend)
        self.shapes: dict[tuple, StaticBuffers] = {}  # one set of buffers per shape, reused

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        return self.model.encode(src)

    def init_cache(self, capacity: int | None = None, beams: int = 1, store: bool = True) -> StaticState:
        if capacity is None or not store:
            raise ValueError("a static decoder needs the search's most steps (capacity) and keeps its cache")
        return StaticState(capacity, beams)

    def buffers(self, rows: int, memory_keys: torch.Tensor, capacity: int) -> StaticBuffers:
        """The buffers of this shape (made at its first batch); memory_keys (memory rows, heads,
        width, d_k) as the first layer projected them (their dtype: autocast's where it runs)."""
        shape = (rows, memory_keys.size(0), rounded(capacity), rounded(memory_keys.size(2)), memory_keys.dtype,
                 memory_keys.device)
        if shape not in self.shapes:
            self.shapes[shape] = StaticBuffers(self.model, *shape)
        return self.shapes[shape]

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor, cache: StaticState) -> torch.Tensor:
        """The logits (rows, 1, V) after tgt (rows, 1), each row's newest token; with CUDA graphs
        they are valid until the next step (a search reads them before)."""
        if cache.buffers is None:
            memory_kv = [layer.cross_attn.project_memory(memory) for layer in self.model.decoder_layers]
            cache.buffers = self.buffers(tgt.size(0), memory_kv[0][0], cache.capacity)
            cache.buffers.start(self.model, memory_kv, src)
        if self.mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        logits = self.step(self.model, cache.buffers, tgt.contiguous(), cache.beams)
        cache.length += 1
        return logits
