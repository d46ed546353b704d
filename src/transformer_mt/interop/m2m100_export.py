"""Our Transformer of M2M-100's family (pre-norm with final LayerNorms, fairseq's positions, one tied
vocabulary, no output bias: an imported M2M-100 / NLLB-200, fine-tuned or not) written back as a
Hugging Face `M2M100ForConditionalGeneration` folder, the inverse of interop/m2m100.py: the weights
in its layout, config.json, generation_config.json (the export command's decoding, the decoder
starting from </s>) and the tokenizer it came with, M2M100Tokenizer's (its codes `__en__`) or
NllbTokenizer's (`eng_Latn`), with the rows it numbers no token for (`<unusedN>`) and the codes
model.new_tokens added as tokens at our ids. Every token's id is checked against ours: a vocabulary
neither tokenizer numbers as ours is refused in one line."""

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

import torch

from transformer_mt.data.tokenizer import MarianVocabulary, Vocabularies
from transformer_mt.errors import ConfigError
from transformer_mt.interop.m2m100 import FINAL_NORMS
from transformer_mt.interop.marian import generation_options, layout
from transformer_mt.model import TransformerConfig
from transformer_mt.model.positions import FAIRSEQ_FIRST
from transformer_mt.validate import Refusal, refuse

M2M100_CODE = "__en__"  # a vocabulary with this code is M2M-100's; without, NLLB-200's


def m2m100_refusal(config: TransformerConfig) -> Refusal:
    """What M2M100ForConditionalGeneration cannot hold of `config`, in one line naming the key."""
    problems = [
        (not config.norm_first, "model.norm_first=false", "its layers are pre-norm"),
        (config.positional != "fairseq", f"model.positional={config.positional}", "its positions are fairseq's"),
        (config.tie_embeddings != "all", f"model.tie_embeddings={config.tie_embeddings}", "it ties all embeddings"),
        (config.output_bias, "model.output_bias=true", "its output layer has no bias"),
        (config.pad_id + 1 != FAIRSEQ_FIRST, f"<pad> = {config.pad_id}", "its positions start at <pad> + 1 = 2"),
        (config.d_k * config.heads != config.d_model, f"model.d_k={config.d_k}", "its heads are d_model / heads"),
    ]
    for bad, what, why in problems:
        if bad:
            return f"{what}: task.format=hf writes an M2M-100 model here, and {why}"
    return None


def m2m100_config(config: TransformerConfig, eos_id: int):
    """The M2M100Config of our config (the decoder starting from </s>, as M2M-100's and NLLB's)."""
    from transformers import M2M100Config

    return M2M100Config(
        vocab_size=config.tgt_vocab_size, d_model=config.d_model, encoder_layers=config.num_encoder_layers,
        decoder_layers=config.num_decoder_layers, encoder_attention_heads=config.heads,
        decoder_attention_heads=config.heads, encoder_ffn_dim=config.d_ff, decoder_ffn_dim=config.d_ff,
        activation_function="silu" if config.activation == "swish" else config.activation,
        max_position_embeddings=config.max_positions, scale_embedding=True, dropout=config.dropout,
        attention_dropout=config.attention_dropout, activation_dropout=config.activation_dropout,
        pad_token_id=config.pad_id, bos_token_id=0, eos_token_id=eos_id, decoder_start_token_id=eos_id,
        tie_word_embeddings=True)


def to_m2m100_state(state: dict[str, torch.Tensor], config: TransformerConfig) -> dict[str, torch.Tensor]:
    """Our Transformer's state_dict as M2M100ForConditionalGeneration's (from_m2m100_state's inverse)."""
    out = {}
    for ours, theirs, _ in layout(config):
        for name, part in zip(theirs, state[ours].chunk(len(theirs))):
            out[name] = part
    for ours, theirs in FINAL_NORMS:
        for part in ("weight", "bias"):
            out[f"{theirs}.{part}"] = state[f"{ours}.{part}"]
    for name in ("model.encoder.embed_tokens", "model.decoder.embed_tokens", "lm_head"):  # tied to model.shared
        out[f"{name}.weight"] = out["model.shared.weight"]
    return {k: v.contiguous() for k, v in out.items()}


def save_m2m100_tokenizer(vocab: MarianVocabulary, folder: Path) -> None:
    """The tokenizer the vocabulary came from, saved in `folder`, its ids ours (else a ConfigError)."""
    from transformers import AutoTokenizer, M2M100Tokenizer, NllbTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "sentencepiece.bpe.model"
        model.write_bytes(vocab.proto)
        if M2M100_CODE in vocab.ids:
            vocab_json = Path(tmp) / "vocab.json"
            first = min(vocab.ids[t] for t in vocab.added)
            vocab_json.write_text(json.dumps({p: i for i, p in enumerate(vocab.pieces[:first])}, ensure_ascii=False),
                                  encoding="utf-8")
            tokenizer = M2M100Tokenizer(str(vocab_json), str(model), num_madeup_words=0)
        else:
            tokenizer = NllbTokenizer.from_pretrained(tmp)  # fairseq's numbering of the model's pieces
        known = tokenizer.get_vocab()
        missing = [p for p in vocab.pieces if p not in known]
        for piece in missing:  # in id order: each gets the next id, ours
            tokenizer.add_tokens([piece], special_tokens=piece in vocab.added)
        tokenizer.save_pretrained(folder)
    again = AutoTokenizer.from_pretrained(folder)
    wrong = [(p, i) for i, p in enumerate(vocab.pieces) if again.convert_tokens_to_ids(p) != i]
    if wrong:
        piece, i = wrong[0]
        raise ConfigError(f"task.format=hf: the vocabulary numbers {piece!r} {i}, M2M-100's and NLLB's tokenizers "
                          f"{again.convert_tokens_to_ids(piece)} ({len(wrong)} tokens differ); it cannot be saved as "
                          "theirs")


def export_m2m100(model, tokenizer: Vocabularies, folder: Path, decoding: Mapping | None = None) -> None:
    """A folder M2M100ForConditionalGeneration / AutoTokenizer load, of a Transformer of M2M-100's
    family and its vocabulary: weights, config, generation config (`decoding`'s search, greedy by
    default; the target language is generate's forced_bos_token_id, per call) and tokenizer."""
    from transformers import GenerationConfig, M2M100ForConditionalGeneration

    config = model.config
    refuse(m2m100_refusal(config))
    if not isinstance(tokenizer.src, MarianVocabulary) or not tokenizer.joint:
        raise ConfigError("task.format=hf writes an M2M-100 model with the tokenizer it was imported with; this "
                          "checkpoint's vocabulary was not (model.init_from=an M2M-100 or NLLB-200 folder)")
    generation = generation_options(decoding)
    ids = tokenizer.special_ids()
    eos, pad = ids["eos_id"], ids["pad_id"]
    save_m2m100_tokenizer(tokenizer.src, folder)
    theirs = M2M100ForConditionalGeneration(m2m100_config(config, eos))
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    missing, unexpected = theirs.load_state_dict(to_m2m100_state(state, config), strict=False)
    missing = [k for k in missing if "embed_positions" not in k]
    if missing or unexpected:
        raise RuntimeError(f"M2M-100 layout mismatch: missing {missing[:4]}, unexpected {unexpected[:4]}")
    theirs.generation_config = GenerationConfig(
        decoder_start_token_id=eos, bos_token_id=0, eos_token_id=eos, pad_token_id=pad,
        max_length=config.max_positions, **generation)
    theirs.eval().save_pretrained(folder)
