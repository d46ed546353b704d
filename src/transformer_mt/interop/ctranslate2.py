"""Our Transformer as a CTranslate2 model, built with its specification API.

CTranslate2's Transformer spec matches ours layer for layer: fused Q, K, V for self-attention,
fused K, V for cross-attention, post-norm (or pre-norm with final LayerNorms), embeddings scaled
by sqrt(d_model). Positions are given as a table (ours, sinusoidal or learned), and the decoder
starts from our BOS. The source vocabulary adds EOS to every input itself (`add_source_eos`), so
CTranslate2 takes the subword tokens of a sentence as they come from the tokenizer.
"""

from pathlib import Path

from transformer_mt.errors import ConfigError

QUANTIZATIONS = ("none", "int8", "int8_float16", "int8_float32", "float16", "bfloat16")


def build_spec(model, vocab):
    """A ctranslate2 TransformerSpec holding `model`'s weights and `vocab`'s tokens."""
    from ctranslate2.specs import common_spec, transformer_spec

    c = model.config
    if c.d_k * c.heads != c.d_model:
        raise ConfigError(f"model.d_k={c.d_k}: CTranslate2's Transformer spec has heads d_model / heads = "
                          f"{c.d_model // c.heads} wide; format=ct2 needs model.d_k=null")
    activation = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
                  "swish": common_spec.Activation.SWISH}[c.activation]
    spec = transformer_spec.TransformerSpec.from_config((c.num_encoder_layers, c.num_decoder_layers), c.heads,
                                                        pre_norm=c.norm_first, activation=activation)
    # copies: CTranslate2 quantizes and reshapes the arrays it is given in place
    w = {k: v.detach().float().cpu().numpy().copy() for k, v in model.state_dict().items()}

    def linear(target, name, bias=True):
        target.weight = w[f"{name}.weight"]
        if bias:
            target.bias = w[f"{name}.bias"]

    def norm(target, name):
        target.gamma, target.beta = w[f"{name}.weight"], w[f"{name}.bias"]

    def positions(target, which):
        name = f"{which}.table" if c.positional == "sinusoidal" else f"{which}.learned.weight"
        table = model.get_submodule(which).table if c.positional == "sinusoidal" else None
        target.encodings = table.float().numpy().copy() if table is not None else w[name]

    spec.encoder.embeddings[0].weight = w["src_embed.weight"]
    spec.decoder.embeddings.weight = w["tgt_embed.weight"]
    linear(spec.decoder.projection, "output_proj", bias=c.output_bias)
    positions(spec.encoder.position_encodings, "src_pos")
    positions(spec.decoder.position_encodings, "tgt_pos")
    if c.norm_first:
        norm(spec.encoder.layer_norm, "encoder_norm")
        norm(spec.decoder.layer_norm, "decoder_norm")
    def self_attention_and_ffn(layer, ours: str, self_norm: str) -> None:
        linear(layer.self_attention.linear[0], f"{ours}.self_attn.qkv_proj")
        linear(layer.self_attention.linear[1], f"{ours}.self_attn.out_proj")
        norm(layer.self_attention.layer_norm, f"{ours}.{self_norm}.norm")
        linear(layer.ffn.linear_0, f"{ours}.ffn.linear1")
        linear(layer.ffn.linear_1, f"{ours}.ffn.linear2")
        norm(layer.ffn.layer_norm, f"{ours}.ffn_block.norm")

    for i, layer in enumerate(spec.encoder.layer):
        self_attention_and_ffn(layer, f"encoder_layers.{i}", "attn_block")
    for i, layer in enumerate(spec.decoder.layer):
        ours = f"decoder_layers.{i}"
        self_attention_and_ffn(layer, ours, "self_block")
        linear(layer.attention.linear[0], f"{ours}.cross_attn.q_proj")
        linear(layer.attention.linear[1], f"{ours}.cross_attn.kv_proj")
        linear(layer.attention.linear[2], f"{ours}.cross_attn.out_proj")
        norm(layer.attention.layer_norm, f"{ours}.cross_block.norm")
    spec.config.layer_norm_epsilon = 1e-5  # torch's LayerNorm default
    ids = vocab.special_ids()  # a Marian vocabulary starts the decoder from <pad>
    spec.config.bos_token, spec.config.eos_token, spec.config.unk_token = vocab.tgt.tokens(
        [ids["bos_id"], ids["eos_id"], ids["unk_id"]])
    spec.config.decoder_start_token = spec.config.bos_token
    spec.config.add_source_eos = True
    spec.register_source_vocabulary(vocab.src.tokens(list(range(vocab.src.vocab_size))))
    spec.register_target_vocabulary(vocab.tgt.tokens(list(range(vocab.tgt.vocab_size))))
    return spec


def export_ct2(module, folder: Path, quantization: str = "none") -> None:
    """A CTranslate2 model directory (model.bin, config.json, the vocabularies)."""
    from ctranslate2.converters.converter import Converter

    if quantization not in QUANTIZATIONS:
        raise ConfigError(f"quantization={quantization}: must be one of {', '.join(QUANTIZATIONS)}")
    spec = build_spec(module.model, module.tokenizer)

    class SpecConverter(Converter):
        def _load(self):
            return spec

    SpecConverter().convert(str(folder), quantization=None if quantization == "none" else quantization, force=True)
