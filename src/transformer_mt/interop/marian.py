"""Our Transformer as a Hugging Face `MarianMTModel` (and back).

Marian in `transformers` is the paper's post-norm Transformer with sinusoidal positions, scaled
embeddings, and one vocabulary shared by the source, target and output layers: ours with
`tie_embeddings=all`. The layouts differ in three places, which the conversion makes agree:
- positions: our table interleaves sin and cos features (sin at 2i, cos at 2i+1, the paper's
  formula); Marian's puts all sines first, then all cosines. The model is exported with its
  d_model features permuted (every weight that reads or writes the residual stream, the LayerNorms
  and the embeddings) so that our table becomes Marian's; the permuted model computes the same
  function.
- attention: our fused Q, K, V (self) and K, V (cross) projections are split into Marian's q_proj,
  k_proj, v_proj.
- the start token: our decoder starts from BOS (Marian's OPUS models from <pad>):
  `decoder_start_token_id` is set to our BOS, and generation bans <pad> as our searches do.
"""

from collections.abc import Mapping

import torch

from transformer_mt.errors import ConfigError, DataError
from transformer_mt.interop.names import LayerNames, decoder_layer, encoder_layer
from transformer_mt.model import TransformerConfig
from transformer_mt.validate import Refusal, refuse


def marian_refusal(config: TransformerConfig) -> Refusal:
    """Why Marian cannot express a model (the config key and value that stand in the way), or None."""
    if config.norm_first:
        return ("model.norm_first=true: Marian models are post-norm; only a post-norm model "
                "(model.norm_first=false) can be exported with task.format=hf")
    if config.positional != "sinusoidal":
        return (f"model.positional={config.positional}: Marian models have sinusoidal positions; "
                "task.format=hf needs model.positional=sinusoidal")
    if config.d_k * config.heads != config.d_model:
        return (f"model.d_k={config.d_k}: Marian's heads are d_model / heads = "
                f"{config.d_model // config.heads} wide; task.format=hf needs model.d_k=null")
    if config.tie_embeddings != "all":
        return (f"model.tie_embeddings={config.tie_embeddings}: Marian shares one vocabulary between "
                "source, target and output layer; task.format=hf needs model.tie_embeddings=all")
    if config.activation not in ("relu", "gelu", "swish"):
        return f"model.activation={config.activation}: task.format=hf supports relu, gelu and swish"
    return None


def marian_order(d_model: int) -> torch.Tensor:
    """Feature m of Marian's residual stream is our feature order[m]: our sines (even features), then
    our cosines (odd features)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def marian_config(config: TransformerConfig, bos_id: int, eos_id: int):
    from transformers import MarianConfig

    return MarianConfig(
        vocab_size=config.tgt_vocab_size, decoder_vocab_size=config.tgt_vocab_size, d_model=config.d_model,
        encoder_layers=config.num_encoder_layers, decoder_layers=config.num_decoder_layers,
        encoder_attention_heads=config.heads, decoder_attention_heads=config.heads,
        encoder_ffn_dim=config.d_ff, decoder_ffn_dim=config.d_ff, activation_function=config.activation,
        max_position_embeddings=config.max_positions, scale_embedding=True, dropout=config.dropout,
        attention_dropout=config.attention_dropout, activation_dropout=config.activation_dropout,
        pad_token_id=config.pad_id, eos_token_id=eos_id, bos_token_id=bos_id, decoder_start_token_id=bos_id,
        forced_eos_token_id=None, share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
    )


def layout(config: TransformerConfig) -> list[tuple[str, list[str], str]]:
    """Where each of our parameters lives in MarianMTModel: (our name, Marian's name(s), how the
    residual-stream features appear in it). A fused projection of ours is Marian's separate ones
    stacked in order (rows); "in": the features are the columns (the tensor reads the residual
    stream), "out": the rows (it writes to it, or normalizes it), "none": neither."""
    entries = [("src_embed.weight", ["model.shared.weight"], "in")]

    def linear(ours: str, theirs: list[str], reads: bool) -> None:
        """A linear layer that reads the residual stream (its columns are features) or writes it (rows)."""
        entries.append((f"{ours}.weight", [f"{t}.weight" for t in theirs], "in" if reads else "out"))
        entries.append((f"{ours}.bias", [f"{t}.bias" for t in theirs], "none" if reads else "out"))

    def norm(ours: str, theirs: str) -> None:
        entries.extend((f"{ours}.{p}", [f"{theirs}.{p}"], "out") for p in ("weight", "bias"))

    def self_attention_and_ffn(names: LayerNames, theirs: str) -> None:
        linear(names.self_qkv, [f"{theirs}.self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj")], reads=True)
        linear(names.self_out, [f"{theirs}.self_attn.out_proj"], reads=False)
        norm(names.self_norm, f"{theirs}.self_attn_layer_norm")
        if names.cross_q is not None:
            linear(names.cross_q, [f"{theirs}.encoder_attn.q_proj"], reads=True)
            linear(names.cross_kv, [f"{theirs}.encoder_attn.{p}" for p in ("k_proj", "v_proj")], reads=True)
            linear(names.cross_out, [f"{theirs}.encoder_attn.out_proj"], reads=False)
            norm(names.cross_norm, f"{theirs}.encoder_attn_layer_norm")
        linear(names.ffn_in, [f"{theirs}.fc1"], reads=True)
        linear(names.ffn_out, [f"{theirs}.fc2"], reads=False)
        norm(names.ffn_norm, f"{theirs}.final_layer_norm")

    for i in range(config.num_encoder_layers):
        self_attention_and_ffn(encoder_layer(i), f"model.encoder.layers.{i}")
    for i in range(config.num_decoder_layers):
        self_attention_and_ffn(decoder_layer(i), f"model.decoder.layers.{i}")
    return entries


def permute(tensor: torch.Tensor, features: str, order: torch.Tensor) -> torch.Tensor:
    """The tensor with its residual-stream features ("in": columns, "out": rows) in `order`."""
    return {"in": lambda t: t[:, order], "out": lambda t: t[order], "none": lambda t: t}[features](tensor)


def to_marian_state(state: dict[str, torch.Tensor], config: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our Transformer's state_dict (`model.` prefix removed) as MarianMTModel's, features permuted."""
    order, out = marian_order(config.d_model), {}
    for ours, theirs, features in layout(config):
        for name, part in zip(theirs, permute(state[ours], features, order).chunk(len(theirs))):
            out[name] = part
    for name in ("model.encoder.embed_tokens", "model.decoder.embed_tokens", "lm_head"):  # tied to model.shared
        out[f"{name}.weight"] = out["model.shared.weight"]
    bias = state.get("output_proj.bias")
    out["final_logits_bias"] = (torch.zeros(config.tgt_vocab_size) if bias is None else bias)[None]
    return {k: v.contiguous() for k, v in out.items()}


def to_marian(model, bos_id: int, eos_id: int):
    """A MarianMTModel (eval mode) that computes what `model` (our Transformer) computes."""
    from transformers import MarianMTModel

    refuse(marian_refusal(model.config))
    marian = MarianMTModel(marian_config(model.config, bos_id, eos_id))
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    missing, unexpected = marian.load_state_dict(to_marian_state(state, model.config), strict=False)
    missing = [k for k in missing if not k.endswith("embed_positions.weight")]
    if missing or unexpected:
        raise RuntimeError(f"Marian layout mismatch: missing {missing[:4]}, unexpected {unexpected[:4]}")
    return marian.eval()


def save_tokenizer(vocab, folder, max_positions: int) -> None:
    """The vocabulary as a tokenizer `AutoTokenizer.from_pretrained(folder)` loads: a fast tokenizer
    (ours is a `tokenizers` JSON) or a MarianTokenizer (ours is sentencepiece, or came from Marian),
    adding EOS after every sentence as our data pipeline does, and detokenizing as ours."""
    from transformer_mt.interop.hf_tokenizer import save_hugging_face

    save_hugging_face(vocab.src, vocab.tgt, folder, max_positions)


def search_generation(decoding: Mapping) -> dict:
    """The Hugging Face keys of the search itself: greedy (num_beams=1), beam (num_beams, length_penalty,
    early_stopping) or sampling (do_sample, temperature, top_k, top_p); anything else is refused."""
    search = str(decoding.get("_target_", "")).rsplit(".", 1)[-1]
    if search == "GreedySearch":
        return {"num_beams": 1, "do_sample": False}
    if search == "BeamSearch":
        norm = decoding.get("length_norm") or {}
        if str(norm.get("_target_", "PowerLength")).rsplit(".", 1)[-1] != "PowerLength":
            raise ConfigError(f"decoding.length_norm._target_={norm.get('_target_')}: Hugging Face's generate "
                              "divides a beam's log-probability by length ** length_penalty; task.format=hf needs "
                              "decoding.length_norm._target_=transformer_mt.decoding.PowerLength")
        # ours stops a sentence at beam_size finished hypotheses: early_stopping=True
        return {"num_beams": int(decoding.get("beam_size", 4)), "do_sample": False,
                "length_penalty": float(norm.get("alpha", 1.0)), "early_stopping": True}
    if search == "Sampling":  # top_k=0 written: Hugging Face's default is 50
        return {"num_beams": 1, "do_sample": True, "temperature": float(decoding.get("temperature", 1.0)),
                "top_k": int(decoding.get("top_k", 0)), "top_p": float(decoding.get("top_p", 1.0))}
    raise ConfigError(f"decoding._target_={decoding.get('_target_')}: task.format=hf carries greedy, beam or sample "
                      "decoding into generation_config.json")


def generation_options(decoding: Mapping | None) -> dict:
    """generation_config.json's decoding keys for our decoding config (the export command's
    `decoding`; None: greedy): the search's (search_generation), and options.min_len and
    options.no_repeat_ngram_size as min_new_tokens and no_repeat_ngram_size where set. Not carried:
    the length limit (max_len_a * src_len + max_len_b has no Hugging Face form: max_length is the
    model's positions), nbest (generate returns one output per sentence) and the sampling seed."""
    decoding = decoding or {"_target_": "transformer_mt.decoding.GreedySearch"}
    out = search_generation(decoding)
    options = decoding.get("options") or {}
    if int(options.get("min_len", 0)) > 0:
        out["min_new_tokens"] = int(options.get("min_len"))
    if int(options.get("no_repeat_ngram_size", 0)) > 0:
        out["no_repeat_ngram_size"] = int(options.get("no_repeat_ngram_size"))
    return out


def export_hf(model, tokenizer, folder, decoding: Mapping | None = None) -> None:
    """A folder MarianMTModel / AutoTokenizer / pipeline("translation") load, of a Transformer and
    its Vocabularies: weights, config, generation config (`decoding`'s search as generation_options
    writes it, greedy by default, and <pad> banned) and tokenizer."""
    from transformers import GenerationConfig

    config = model.config
    refuse(marian_refusal(config))
    generation = generation_options(decoding)
    ids = tokenizer.special_ids()
    bos, eos, pad = ids["bos_id"], ids["eos_id"], ids["pad_id"]
    save_tokenizer(tokenizer, folder, config.max_positions)
    marian = to_marian(model, bos, eos)
    marian.generation_config = GenerationConfig(
        decoder_start_token_id=bos, bos_token_id=bos, eos_token_id=eos, pad_token_id=pad, bad_words_ids=[[pad]],
        max_length=config.max_positions, forced_eos_token_id=None, **generation,
    )
    marian.save_pretrained(folder)


# ------------------------------------------------------------------------------------ import
def from_marian_state(state: dict[str, torch.Tensor], config: TransformerConfig) -> dict[str, torch.Tensor]:
    """MarianMTModel's state_dict as our Transformer's (the inverse of to_marian_state)."""
    inverse, out = torch.argsort(marian_order(config.d_model)), {}
    for ours, theirs, features in layout(config):
        out[ours] = permute(torch.cat([state[name] for name in theirs]), features, inverse)
    for name in ("tgt_embed", "output_proj"):  # tied to src_embed
        out[f"{name}.weight"] = out["src_embed.weight"]
    out["output_proj.bias"] = state["final_logits_bias"].reshape(-1)
    return {k: v.contiguous() for k, v in out.items()}


def marian_architecture(config, folder) -> dict:
    """Our model keys for a MarianConfig; what we cannot represent is refused with the reason."""
    where = f"model.init_from={folder}"
    problems = [
        (not config.share_encoder_decoder_embeddings, "its source and target embeddings are separate"),
        (not config.scale_embedding, "its embeddings are not scaled by sqrt(d_model)"),
        (config.encoder_attention_heads != config.decoder_attention_heads, "encoder and decoder head counts differ"),
        (config.encoder_ffn_dim != config.decoder_ffn_dim, "encoder and decoder FFN widths differ"),
        (config.activation_function not in ("relu", "gelu", "swish", "silu"),
         f"activation {config.activation_function!r} (we have relu, gelu, swish)"),
        (config.d_model % config.encoder_attention_heads != 0, "d_model is not a multiple of the head count"),
        (getattr(config, "decoder_vocab_size", None) not in (None, config.vocab_size), "a separate target vocabulary"),
    ]
    for bad, reason in problems:
        if bad:
            raise DataError(f"{where}: a Marian model we cannot represent: {reason}")
    return {**hf_shape(config), "norm_first": False, "positional": "sinusoidal", "output_bias": True}


def hf_shape(config) -> dict:
    """Our model keys for the shape a transformers encoder-decoder config of Marian's family gives
    (Marian, M2M-100: one head count and FFN width for both stacks, one shared vocabulary)."""
    return {"num_encoder_layers": config.encoder_layers, "num_decoder_layers": config.decoder_layers,
            "d_model": config.d_model, "d_ff": config.encoder_ffn_dim, "heads": config.encoder_attention_heads,
            "d_k": None, "activation": "swish" if config.activation_function == "silu" else config.activation_function,
            "max_positions": config.max_position_embeddings, "tie_embeddings": "all"}


def marian_vocabularies(folder):
    """The folder's tokenizer as our Vocabularies: OPUS-MT's source.spm / target.spm / vocab.json
    (MarianVocabulary), or a `tokenizers` JSON (tokenizer.json, as our export writes it)."""
    import json
    from pathlib import Path

    from transformer_mt.data.tokenizer import MarianVocabulary, TextTokenizer, Vocabularies

    folder = Path(folder)
    if (folder / "vocab.json").is_file() and (folder / "source.spm").is_file():
        ids = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        pieces = [piece for piece, _ in sorted(ids.items(), key=lambda item: item[1])]
        if [ids[p] for p in pieces] != list(range(len(pieces))):
            raise DataError(f"model.init_from={folder}: vocab.json does not number its pieces 0..{len(pieces) - 1}")
        target = folder / "target.spm" if (folder / "target.spm").is_file() else folder / "source.spm"
        src = MarianVocabulary((folder / "source.spm").read_bytes(), pieces)
        tgt = MarianVocabulary(target.read_bytes(), pieces)
        return Vocabularies(src, tgt)
    if (folder / "tokenizer.json").is_file():
        return Vocabularies(TextTokenizer.load(folder / "tokenizer.json"))
    raise DataError(f"model.init_from={folder}: no tokenizer (source.spm + vocab.json, or tokenizer.json)")


def read_marian(folder, key: str = "model.init_from") -> tuple[dict, dict[str, torch.Tensor], "object"]:
    """A local Marian folder (as downloaded from the hub) as (our model keys, our state_dict, our
    Vocabularies); errors name `key`."""
    from pathlib import Path

    from transformers import MarianConfig, MarianMTModel

    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise DataError(f"{key}={folder}: no config.json there (a local Marian model folder)")
    config = MarianConfig.from_pretrained(folder)
    if config.model_type != "marian":
        raise DataError(f"{key}={folder}: a {config.model_type!r} model, not a Marian one")
    architecture = marian_architecture(config, folder)
    vocab = marian_vocabularies(folder)
    if vocab.src.vocab_size != config.vocab_size:
        raise DataError(f"{key}={folder}: the tokenizer has {vocab.src.vocab_size} pieces, the model "
                          f"{config.vocab_size}")
    if vocab.special_ids()["pad_id"] != config.pad_token_id:
        raise DataError(f"{key}={folder}: <pad> is {vocab.special_ids()['pad_id']} in the tokenizer, "
                          f"{config.pad_token_id} in config.json")
    marian = MarianMTModel.from_pretrained(folder).eval()
    if not torch.equal(marian.lm_head.weight, marian.model.shared.weight):
        raise DataError(f"{key}={folder}: a Marian model we cannot represent: its output layer is not "
                          "tied to the embeddings")
    ours = TransformerConfig(src_vocab_size=config.vocab_size, tgt_vocab_size=config.vocab_size,
                             pad_id=config.pad_token_id, **architecture)
    state = {k: v.detach().float() for k, v in marian.state_dict().items()}
    return architecture, from_marian_state(state, ours), vocab
