"""Our Transformer's parameter names by role, in one place for every converter (the Marian export
and import, the CTranslate2 export): a converter maps roles to its own names, never ours."""

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerNames:
    """The modules of one layer of ours (names in `Transformer.state_dict()`, without `.weight`)."""

    self_qkv: str  # self-attention's fused Q, K, V projection
    self_out: str  # self-attention's output projection
    self_norm: str  # the LayerNorm of the self-attention block
    ffn_in: str  # the FFN's first linear layer (d_model -> d_ff)
    ffn_out: str  # its second (d_ff -> d_model)
    ffn_norm: str  # the LayerNorm of the FFN block
    self_relative: str  # model.positional=relative: self-attention's distance embeddings (`.keys`, `.values`)
    cross_q: str | None = None  # decoder layers: cross-attention's Q projection (from the decoder)
    cross_kv: str | None = None  # its fused K, V projection (from the encoder memory)
    cross_out: str | None = None  # its output projection
    cross_norm: str | None = None  # the LayerNorm of the cross-attention block


def encoder_layer(i: int) -> LayerNames:
    ours = f"encoder_layers.{i}"
    return LayerNames(f"{ours}.self_attn.qkv_proj", f"{ours}.self_attn.out_proj", f"{ours}.attn_block.norm",
                      f"{ours}.ffn.linear1", f"{ours}.ffn.linear2", f"{ours}.ffn_block.norm",
                      f"{ours}.self_attn.relative")


def decoder_layer(i: int) -> LayerNames:
    ours = f"decoder_layers.{i}"
    return LayerNames(f"{ours}.self_attn.qkv_proj", f"{ours}.self_attn.out_proj", f"{ours}.self_block.norm",
                      f"{ours}.ffn.linear1", f"{ours}.ffn.linear2", f"{ours}.ffn_block.norm",
                      f"{ours}.self_attn.relative", f"{ours}.cross_attn.q_proj", f"{ours}.cross_attn.kv_proj",
                      f"{ours}.cross_attn.out_proj", f"{ours}.cross_block.norm")
