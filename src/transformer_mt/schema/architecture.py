"""The `model` group (conf/model/*.yaml): the Transformer's keys (model/transformer.py's
TransformerConfig, whose vocabulary sizes and pad id come from the tokenizer), `init_from` and
`new_tokens`."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from transformer_mt.choices import ACTIVATIONS, POSITIONS, TIES
from transformer_mt.schema.keys import Group, key
from transformer_mt.validate import (
    AT_LEAST_1,
    BOOLEAN,
    PROBABILITY,
    Refusal,
    integer,
    listing,
    one_of,
    text,
    value_refusal,
)


@dataclass
class ModelGroup(Group):
    """The paper's Table 3, and the switches its ablations need (defaults: the base model)."""

    num_encoder_layers: Any = key(6, "encoder layers (N)", AT_LEAST_1)
    num_decoder_layers: Any = key(6, "decoder layers (N)", AT_LEAST_1)
    d_model: Any = key(512, "the width of embeddings and layer outputs", AT_LEAST_1)
    d_ff: Any = key(2048, "the FFN's inner width", AT_LEAST_1)
    heads: Any = key(8, "attention heads (h)", AT_LEAST_1)
    d_k: Any = key(None, "per-head width of Q, K and V (= d_v); null: d_model / heads",
                   AT_LEAST_1, nullable=True)
    dropout: Any = key(0.1, "residual dropout, and dropout on embeddings + positions (P_drop)", PROBABILITY)
    attention_dropout: Any = key(0.0, "dropout on attention probabilities", PROBABILITY)
    activation_dropout: Any = key(0.0, "dropout inside the FFN, after the activation", PROBABILITY)
    activation: Any = key("relu", "the FFN's activation", (one_of(*ACTIVATIONS), listing(ACTIVATIONS)))
    norm_first: Any = key(False, "false: post-norm (the paper); true: pre-norm with final LayerNorms", BOOLEAN)
    positional: Any = key("sinusoidal", "positions: sinusoidal | learned (added to the embeddings) | rotary "
                                        "(RoPE) | relative (Shaw et al. 2018): those two in self-attention | "
                                        "fairseq (M2M-100's and NLLB's sinusoids, added: imported models)",
                          (one_of(*POSITIONS), listing(POSITIONS)))
    max_positions: Any = key(1024, "the longest sequence, in tokens", (integer(2), "an integer >= 2"))
    max_relative_positions: Any = key(16, "positional=relative: distances clipped to +-this", AT_LEAST_1)
    tie_embeddings: Any = key("all", "all: source = target embedding = output layer; decoder: target = output; "
                                     "none", (one_of(*TIES), listing(TIES)))
    output_bias: Any = key(False, "a bias on the output layer (Marian / OPUS-MT models have one)", BOOLEAN)
    init_from: Any = key(None, "a checkpoint, one of our runs or a local Marian / OPUS-MT folder to start from "
                               "(a folder's architecture and vocabulary replace the keys above)",
                         (text, "a path"), nullable=True)
    new_tokens: Any = key([], "with init_from: tokens added to its imported vocabulary (new language codes, e.g. "
                              "[kas_Deva], then named in data.corpora.NAME.tag / target_tag), each a new embedding "
                              "row initialised to the mean of the rows of its language codes",
                          (lambda v: isinstance(v, Sequence) and not isinstance(v, str) and all(map(text, v)),
                           "a list of tokens ([kas_Deva])"))

    @staticmethod
    def refusal(node: DictConfig, prefix: str) -> Refusal:
        """Heads of width d_model / heads need heads to divide d_model; rotary positions rotate pairs of
        dimensions: heads of even width."""
        d_model, heads = node.d_model, node.heads
        if node.new_tokens and not node.init_from:
            return (f"{prefix}new_tokens adds tokens to the vocabulary of an imported model ({prefix}init_from=DIR); "
                    "a vocabulary trained here takes its tags from data.corpora.NAME.tag / target_tag")
        if node.d_k is None and d_model % heads:
            return f"{prefix}d_model={d_model} is not divisible by {prefix}heads={heads}; set {prefix}d_k"
        if node.positional == "rotary":
            return value_refusal(f"{prefix}d_k", node.d_k or d_model // heads, lambda v: v % 2 == 0,
                                 f"even with {prefix}positional=rotary (it rotates pairs of dimensions)")
        return None
