"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), read top to bottom.

    src -> embed * sqrt(d) + positions -> N x EncoderLayer -> memory
    tgt_in -> embed * sqrt(d) + positions -> N x DecoderLayer(memory) -> linear -> logits

Pure PyTorch: no Lightning, no Hydra. Decoding strategies live in `transformer_mt.decoding` and
use only `encode`, `decode` and `init_cache` (model/cache.py); training uses `features` (decoder
states, for a loss that applies the output layer itself); attention probabilities are recorded by
`model.maps.attention_maps`.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.utils.checkpoint
from torch import nn

from transformer_mt.errors import ConfigError
from transformer_mt.model.cache import DecoderCache, LayerCache
from transformer_mt.model.embedding import TokenEmbedding
from transformer_mt.model.layers import DecoderLayer, EncoderLayer
from transformer_mt.model.output_rows import restricted_output
from transformer_mt.model.positions import position_kind
from transformer_mt.packing import Packing, Varlen


@dataclass
class TransformerConfig:
    """Every knob of the paper's Table 3, plus the switches ablations need."""

    src_vocab_size: int
    tgt_vocab_size: int
    pad_id: int = 0
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_model: int = 512
    d_ff: int = 2048
    heads: int = 8
    d_k: int | None = None  # per-head width of Q, K and V; None = d_model // heads
    dropout: float = 0.1  # residual dropout and dropout on embeddings + positions
    attention_dropout: float = 0.0  # on attention probabilities
    activation_dropout: float = 0.0  # inside the FFN, after the activation
    activation: str = "relu"  # relu | gelu
    norm_first: bool = False  # False: post-norm (the paper); True: pre-norm with final LayerNorms
    positional: str = "sinusoidal"  # sinusoidal | learned | rotary | relative (the last two: in self-attention)
    max_positions: int = 1024
    max_relative_positions: int = 16  # positional=relative: distances clipped to +-this (Shaw et al. 2018)
    tie_embeddings: str = "all"  # all: src = tgt = output; decoder: tgt = output; none
    output_bias: bool = False  # a bias on the output layer (Marian / OPUS-MT models have one)

    def __post_init__(self) -> None:
        """d_k from d_model / heads where it is null; a tied output layer needs one vocabulary. (The keys'
        own rules are the schema's, transformer_mt/schema/architecture.py, checked when the config is composed.)"""
        if self.d_k is None:
            self.d_k = self.d_model // self.heads
        if self.tie_embeddings == "all" and self.src_vocab_size != self.tgt_vocab_size:
            raise ConfigError(
                "model.tie_embeddings=all needs a joint vocabulary (equal source and target sizes); with separate "
                "vocabularies (data.tokenizer.joint=false) use model.tie_embeddings=decoder or none"
            )


def run_layer(layer: nn.Module, *args, **kwargs) -> torch.Tensor:
    """Calls `layer`: how a stack runs its layers unless told otherwise (`Runners`)."""
    return layer(*args, **kwargs)


@dataclass(frozen=True)
class Runners:
    """How the encoder and decoder stacks call each of their layers, `runner(layer, *args)`:
    directly, or through a compiled function (module.compile: one graph serves a whole stack)."""

    encoder: Callable[..., torch.Tensor] = run_layer
    decoder: Callable[..., torch.Tensor] = run_layer

    def checkpointed(self) -> "Runners":
        """These runners with each layer's activations recomputed in the backward pass instead of
        kept (activation checkpointing: torch.utils.checkpoint, non-reentrant, the RNG state kept so
        that dropout draws the same masks again: the same gradients, less memory, one more forward)."""

        def wrap(run: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
            return lambda layer, *args, **kwargs: torch.utils.checkpoint.checkpoint(
                run, layer, *args, use_reentrant=False, **kwargs)

        return Runners(wrap(self.encoder), wrap(self.decoder))


class Transformer(nn.Module):
    normalized = False  # decode gives logits (decoding.search.SearchModel)
    fixed_rows = False  # finished rows may leave the batch (decoding.search.SearchModel)

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        # the kind of positions (model/positions.py), built once: the embeddings' and self-attention's parts
        self.positions = kind = position_kind(c.positional, c.max_positions, c.d_model, c.d_k,
                                              c.max_relative_positions)
        layer_args = dict(
            d_model=c.d_model, heads=c.heads, d_k=c.d_k, d_ff=c.d_ff, dropout=c.dropout,
            attention_dropout=c.attention_dropout, activation_dropout=c.activation_dropout,
            activation=c.activation, norm_first=c.norm_first,
        )
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id)
        self.tgt_embed = (
            self.src_embed if c.tie_embeddings == "all" else TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id)
        )
        self.src_pos, self.tgt_pos = kind.table(), kind.table()
        self.embed_dropout = nn.Dropout(c.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(**layer_args, positions=kind.self_attention())
                                            for _ in range(c.num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(**layer_args, positions=kind.self_attention())
                                            for _ in range(c.num_decoder_layers))
        # pre-norm needs a LayerNorm on the outputs of the stacks; post-norm already ends with one
        self.encoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.output_proj = nn.Linear(c.d_model, c.tgt_vocab_size, bias=c.output_bias)
        self.reset_parameters()
        if c.tie_embeddings in ("all", "decoder"):
            self.output_proj.weight = self.tgt_embed.weight

    def reset_parameters(self) -> None:
        """Xavier-uniform projections, zero biases; embeddings N(0, d_model^-0.5) with a zero pad row,
        so that embeddings * sqrt(d_model) have unit variance and tied output logits start small."""
        for name, p in self.named_parameters():
            if "embed" in name or "learned" in name:
                nn.init.normal_(p, mean=0.0, std=self.config.d_model**-0.5)
            elif p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        with torch.no_grad():
            self.src_embed.weight[self.config.pad_id].zero_()
            self.tgt_embed.weight[self.config.pad_id].zero_()

    def num_parameters(self) -> int:
        """Trainable parameters, each shared tensor counted once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    # ----------------------------------------------------------------------------------- masks
    def padding_mask(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, S) tokens -> (B, 1, 1, S) boolean mask, True where a key is a real token."""
        return (tokens != self.config.pad_id)[:, None, None, :]

    # --------------------------------------------------------------------------------- encoder
    def encode(self, src: torch.Tensor, packing: Packing | None = None, run: Callable = run_layer) -> torch.Tensor:
        """src (B, S) -> memory (B, S, D); packed: src (Ns,) -> (Ns, D). run: how to call a layer."""
        src_mask = self.padding_mask(src) if packing is None else Varlen(packing.src, packing.src)
        packed = None if packing is None else packing.src
        x = self.embed_dropout(self.src_pos(self.src_embed(src), packed=packed))
        for layer in self.encoder_layers:
            x = run(layer, x, src_mask)
        return self.encoder_norm(x)

    # --------------------------------------------------------------------------------- decoder
    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor,
               cache: DecoderCache | None = None) -> torch.Tensor:
        """tgt (B, T) -> logits (B, T, V), attending to `memory` where `src` is not padding.

        With a cache (from `init_cache`) that keeps K and V, tgt holds only the newest token of each
        sequence: K and V of earlier steps come from the cache, and the new ones are written into
        it. memory and src have B / beams rows, `beams` the cache's (no cache: 1): `beams`
        consecutive rows of tgt (the beams of a sentence) share one; any other layout is a ValueError.
        """
        return self.output_proj(self.decoder_states(tgt, memory, src, cache))

    def decoder_states(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor,
                       cache: DecoderCache | None = None) -> torch.Tensor:
        """`decode` without the output layer: the decoder's states (B, T, D), for an output layer of
        some rows only (`output_rows`; decoding.shortlist)."""
        if cache is not None and cache.length and tgt.size(1) != 1:
            raise ValueError("incremental decoding takes one new token per step")
        return self._decoder(tgt, memory, src, cache)

    def output_rows(self, rows: torch.Tensor) -> nn.Module:
        """The output layer of the target tokens `rows` only (C,): logits (..., C), column j that of
        token rows[j], equal to those columns of the whole layer's (model/output_rows.py)."""
        return restricted_output(self.output_proj, rows)

    def _decoder(self, tgt: torch.Tensor, memory: torch.Tensor, src: torch.Tensor, cache: DecoderCache | None = None,
                 packing: Packing | None = None, run: Callable = run_layer) -> torch.Tensor:
        """The decoder stack: (B, T, D) states the output layer turns into logits (packed: (Nt, D)).

        Self-attention is causal with no mask (`is_causal`, which FlashAttention runs): targets are
        right-padded, so a real position i only sees keys <= i, all real; what padded positions
        compute never reaches the loss (their targets are padding) nor a real position."""
        if packing is None:
            memory_mask, self_mask, packed = self.padding_mask(src), None, None
        else:
            memory_mask, self_mask = Varlen(packing.tgt, packing.src), Varlen(packing.tgt, packing.tgt)
            packed = packing.tgt
        offset = 0 if cache is None else cache.length  # a Python int: no host sync
        x = self.embed_dropout(self.tgt_pos(self.tgt_embed(tgt), offset=offset, packed=packed))
        return self.decoder_stack(x, memory, memory_mask, None if cache is None else cache.layers, self_mask, run)

    def decoder_stack(self, x: torch.Tensor, memory: torch.Tensor | None, memory_mask: torch.Tensor | Varlen,
                      caches: list[LayerCache] | None = None, self_mask: Varlen | None = None,
                      run: Callable = run_layer) -> torch.Tensor:
        """The decoder layers in turn on the embedded targets x, then the final norm: the one walk of
        the decoder, for every path (teacher forcing, packed streams, the growing cache's steps and
        the static step's, model/static_step.py). caches: one per layer (a DecoderCache's `layers`,
        or the static buffers'); memory may be None where they hold its keys and values."""
        for i, layer in enumerate(self.decoder_layers):
            x = run(layer, x, memory, memory_mask, cache=None if caches is None else caches[i], self_mask=self_mask)
        return self.decoder_norm(x)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits (B, T, V) for source (B, S) and shifted target (B, T)."""
        return self.decode(tgt_in, self.encode(src), src)

    def features(self, src: torch.Tensor, tgt_in: torch.Tensor, packing: Packing | None = None,
                 runners: Runners | None = None) -> torch.Tensor:
        """Teacher-forced decoder states (B, T, D): `forward` without the output layer, for a
        loss that applies the output layer itself (training.loss.output_layer_loss). With a
        `packing` (transformer_mt/packing.py), src (Ns,) and tgt_in (Nt,) are packed streams, and so
        are the states (Nt, D): no padding anywhere. runners: how the stacks call their layers."""
        runners = runners or Runners()
        memory = self.encode(src, packing, runners.encoder)
        return self._decoder(tgt_in, memory, src, packing=packing, run=runners.decoder)

    # ------------------------------------------------------------------- incremental decoding
    def init_cache(self, capacity: int | None = None, beams: int = 1, store: bool = True) -> DecoderCache:
        """An empty cache for `decode`, the search's decode state: `beams` prefixes per memory row;
        self-attention K, V go into buffers allocated at the first step for `capacity` positions (a
        search's most steps; None: they grow as needed) and written in place each step;
        cross-attention K, V are projected at the first step. store=False keeps nothing (every call
        decodes its whole prefix). A search moves beams with `cache.select(index, memory_index)`."""
        return DecoderCache(len(self.decoder_layers), capacity, beams, store)

