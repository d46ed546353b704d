"""Our Transformer as a CTranslate2 model, built with its specification API.

CTranslate2's Transformer spec matches ours layer for layer: fused Q, K, V for self-attention,
fused K, V for cross-attention, post-norm (or pre-norm with final LayerNorms), embeddings scaled
by sqrt(d_model). Each kind of positions maps onto the spec's own, exactly:
- sinusoidal or learned: the position table (ours), added to the embeddings;
- rotary: RoPE on the queries and keys of every self-attention, encoder's and decoder's (never
  cross-attention's), over the whole head (`rotary_dim=0`), rotating dimensions (i, i + d/2)
  (`rotary_interleave=False`, the GPT-NeoX layout, ours) at our base; no table;
- relative (Shaw et al. 2018): each self-attention's key and value embeddings of the distances
  -c ... c, row for row (`relative_position_keys` / `relative_position_values`; CTranslate2 reads c
  from their 2c + 1 rows and clips j - i as we do); no table.
The decoder starts from our BOS. The source vocabulary adds EOS to every input itself
(`add_source_eos`), so CTranslate2 takes the subword tokens of a sentence as they come from the
tokenizer.
"""

from pathlib import Path
from typing import TYPE_CHECKING

from transformer_mt.choices import CT2_QUANTIZATIONS
from transformer_mt.errors import ConfigError
from transformer_mt.interop.names import LayerNames, decoder_layer, encoder_layer
from transformer_mt.model import TransformerConfig
from transformer_mt.model.positions import PositionKind
from transformer_mt.validate import check, listing, one_of

if TYPE_CHECKING:
    from ctranslate2.specs.transformer_spec import TransformerSpec


def build_spec(model, vocab):
    """A ctranslate2 TransformerSpec holding `model`'s weights and `vocab`'s tokens."""
    c = model.config
    if c.d_k * c.heads != c.d_model:
        raise ConfigError(f"model.d_k={c.d_k}: CTranslate2's Transformer spec has heads d_model / heads = "
                          f"{c.d_model // c.heads} wide; task.format=ct2 needs model.d_k=null")
    spec = empty_spec(c, model.positions)
    fill_weights(spec, Weights(model))
    spec.config.layer_norm_epsilon = 1e-5  # torch's LayerNorm default
    ids = vocab.special_ids()  # a Marian vocabulary starts the decoder from <pad>
    spec.config.bos_token, spec.config.eos_token, spec.config.unk_token = vocab.tgt.tokens(
        [ids["bos_id"], ids["eos_id"], ids["unk_id"]])
    spec.config.decoder_start_token = spec.config.bos_token
    spec.config.add_source_eos = True
    spec.register_source_vocabulary(vocab.src.tokens(list(range(vocab.src.vocab_size))))
    spec.register_target_vocabulary(vocab.tgt.tokens(list(range(vocab.tgt.vocab_size))))
    return spec


def empty_spec(c: TransformerConfig, positions: PositionKind) -> "TransformerSpec":
    """The TransformerSpec of config `c` and its kind of positions, without weights: the encoder and
    decoder specs' position arguments are the kind's (model/positions.py: none for a table, their
    `position_encodings`; RoPE or distance embeddings inside self-attention otherwise). (The encoder
    spec keeps an empty position_encodings with rotary positions: CTranslate2 adds no table where
    self-attention has its own positions.)"""
    from ctranslate2.specs import common_spec
    from ctranslate2.specs.transformer_spec import TransformerDecoderSpec, TransformerEncoderSpec, TransformerSpec

    activation = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
                  "swish": common_spec.Activation.SWISH}[c.activation]
    stack = dict(pre_norm=c.norm_first, activation=activation, **positions.ct2_options())
    return TransformerSpec(TransformerEncoderSpec(c.num_encoder_layers, c.heads, **stack),
                           TransformerDecoderSpec(c.num_decoder_layers, c.heads, **stack))


class Weights:
    """Our model's weights as the numpy arrays a spec takes: copies, since CTranslate2 quantizes and
    reshapes the arrays it is given in place."""

    def __init__(self, model) -> None:
        self.model, self.config = model, model.config
        self.arrays = {k: v.detach().float().cpu().numpy().copy() for k, v in model.state_dict().items()}

    def linear(self, target, name: str, bias: bool = True) -> None:
        target.weight = self.arrays[f"{name}.weight"]
        if bias:
            target.bias = self.arrays[f"{name}.bias"]

    def norm(self, target, name: str) -> None:
        target.gamma, target.beta = self.arrays[f"{name}.weight"], self.arrays[f"{name}.bias"]

    def positions(self, stack, which: str) -> None:
        """The position table our module `which` adds to the embeddings (a sinusoid buffer, not in the
        state dict, or a learned embedding), where it has one: none with positions in self-attention."""
        rows = self.model.get_submodule(which).rows()
        if rows is not None:
            stack.position_encodings.encodings = rows.detach().float().cpu().numpy().copy()

    def relative(self, attention, name: str) -> None:
        """A self-attention's distance embeddings (model.positional=relative): rows -c ... c, as ours."""
        attention.relative_position_keys = self.arrays[f"{name}.keys.weight"]
        attention.relative_position_values = self.arrays[f"{name}.values.weight"]

    def layer(self, layer, names: LayerNames) -> None:
        """An encoder or decoder layer of the spec from ours (names.py)."""
        self.linear(layer.self_attention.linear[0], names.self_qkv)
        self.linear(layer.self_attention.linear[1], names.self_out)
        self.norm(layer.self_attention.layer_norm, names.self_norm)
        if self.model.positions.ct2_options().get("relative_position"):  # the kind's spec asks for them
            self.relative(layer.self_attention, names.self_relative)
        if names.cross_q is not None:
            self.linear(layer.attention.linear[0], names.cross_q)
            self.linear(layer.attention.linear[1], names.cross_kv)
            self.linear(layer.attention.linear[2], names.cross_out)
            self.norm(layer.attention.layer_norm, names.cross_norm)
        self.linear(layer.ffn.linear_0, names.ffn_in)
        self.linear(layer.ffn.linear_1, names.ffn_out)
        self.norm(layer.ffn.layer_norm, names.ffn_norm)


def fill_weights(spec, w: Weights) -> None:
    """Every weight of the spec, from ours."""
    spec.encoder.embeddings[0].weight = w.arrays["src_embed.weight"]
    spec.decoder.embeddings.weight = w.arrays["tgt_embed.weight"]
    w.linear(spec.decoder.projection, "output_proj", bias=w.config.output_bias)
    w.positions(spec.encoder, "src_pos")
    w.positions(spec.decoder, "tgt_pos")
    if w.config.norm_first:
        w.norm(spec.encoder.layer_norm, "encoder_norm")
        w.norm(spec.decoder.layer_norm, "decoder_norm")
    for i, layer in enumerate(spec.encoder.layer):
        w.layer(layer, encoder_layer(i))
    for i, layer in enumerate(spec.decoder.layer):
        w.layer(layer, decoder_layer(i))


def export_ct2(model, tokenizer, folder: Path, quantization: str = "none") -> None:
    """A CTranslate2 model directory (model.bin, config.json, the vocabularies) of a Transformer
    and its Vocabularies."""
    from ctranslate2.converters.converter import Converter

    check("task.quantization", quantization, one_of(*CT2_QUANTIZATIONS), listing(CT2_QUANTIZATIONS))
    spec = build_spec(model, tokenizer)

    class SpecConverter(Converter):
        def _load(self):
            return spec

    SpecConverter().convert(str(folder), quantization=None if quantization == "none" else quantization, force=True)
