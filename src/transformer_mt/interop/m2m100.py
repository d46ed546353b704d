"""A Hugging Face `M2M100ForConditionalGeneration` folder (M2M-100, NLLB-200) read as our Transformer.

Both are Transformers of the paper's family with switches ours has: pre-norm layers with a final
LayerNorm in each stack (`norm_first=true`), embeddings scaled by sqrt(d_model), one vocabulary
shared by the encoder, the decoder and the output layer (`tie_embeddings=all`), no output bias,
ReLU FFNs, and fairseq's sinusoids counted from <pad> + 1 (`positional=fairseq`). Their layers are
named as Marian's (interop/marian.py's `layout`), with the residual stream's features in our order
(no permutation: our fairseq table is theirs), plus the two final LayerNorms. What a folder holds
that ours cannot represent is refused in one line naming model.init_from and the config field."""

from pathlib import Path

import torch

from transformer_mt.data.tokenizer import EOS, ROLES, MarianVocabulary, Vocabularies
from transformer_mt.errors import DataError
from transformer_mt.interop.marian import hf_shape, layout
from transformer_mt.model import TransformerConfig
from transformer_mt.model.positions import FAIRSEQ_FIRST

FINAL_NORMS = (("encoder_norm", "model.encoder.layer_norm"), ("decoder_norm", "model.decoder.layer_norm"))


def m2m100_architecture(config, where: str) -> dict:
    """Our model keys for an M2M100Config; a field we cannot represent: a DataError naming it."""
    problems = [
        (config.model_type != "m2m_100", "model_type", f"{config.model_type!r}, not 'm2m_100'"),
        (not config.scale_embedding, "scale_embedding", "false: its embeddings are not scaled by sqrt(d_model)"),
        (config.encoder_attention_heads != config.decoder_attention_heads, "decoder_attention_heads",
         "the encoder and decoder head counts differ"),
        (config.encoder_ffn_dim != config.decoder_ffn_dim, "decoder_ffn_dim",
         "the encoder and decoder FFN widths differ"),
        (config.activation_function not in ("relu", "gelu", "swish", "silu"), "activation_function",
         f"{config.activation_function!r} (we have relu, gelu, swish)"),
        (config.d_model % config.encoder_attention_heads != 0, "d_model", "not a multiple of the head count"),
        (config.pad_token_id + 1 != FAIRSEQ_FIRST, "pad_token_id",
         f"{config.pad_token_id}: fairseq's positions start at <pad> + 1, ours at {FAIRSEQ_FIRST} (pad 1)"),
        (not getattr(config, "tie_word_embeddings", True), "tie_word_embeddings",
         "false: its output layer is not the embeddings"),
    ]
    for bad, field, why in problems:
        if bad:
            raise DataError(f"{where}: config.json's {field} is {why}; transformer-mt cannot represent it")
    return {**hf_shape(config), "norm_first": True, "positional": "fairseq", "output_bias": False}


def from_m2m100_state(state: dict[str, torch.Tensor], config: TransformerConfig) -> dict[str, torch.Tensor]:
    """M2M100ForConditionalGeneration's state_dict as our Transformer's."""
    out = {ours: torch.cat([state[name] for name in theirs]) for ours, theirs, _ in layout(config)}
    for ours, theirs in FINAL_NORMS:
        for part in ("weight", "bias"):
            out[f"{ours}.{part}"] = state[f"{theirs}.{part}"]
    for name in ("tgt_embed", "output_proj"):  # tied to src_embed
        out[f"{name}.weight"] = out["src_embed.weight"]
    return {k: v.contiguous() for k, v in out.items()}


def m2m100_vocabularies(folder: Path, size: int, where: str) -> Vocabularies:
    """The folder's tokenizer as our Vocabularies, whose decoder starts from </s> as M2M-100's and
    NLLB's do: M2M-100's (vocab.json), or NLLB's (tokenizer.json); an unusable one: a DataError."""
    if not (folder / "sentencepiece.bpe.model").is_file():
        raise DataError(f"{where}: no sentencepiece.bpe.model there (M2M-100's and NLLB's tokenizers cut text "
                        "with it)")
    if (folder / "vocab.json").is_file():
        pieces, added = m2m100_pieces(folder, size, where)
    elif (folder / "tokenizer.json").is_file():
        pieces, added = nllb_pieces(folder, size, where)
    else:
        raise DataError(f"{where}: no vocab.json (M2M-100's tokenizer) nor tokenizer.json (NLLB's) there")
    return Vocabularies(MarianVocabulary((folder / "sentencepiece.bpe.model").read_bytes(), pieces, start=EOS,
                                         added=added))


def m2m100_pieces(folder: Path, size: int, where: str) -> tuple[list[str], list[str]]:
    """M2M100Tokenizer's numbering: vocab.json's pieces, then the language codes (`__en__`, ...) it
    numbers after them, up to the model's `size` rows (`<unusedN>` for rows no token has: its
    made-up words); and those past vocab.json (dropped when decoding; the codes are its tags)."""
    from transformers import M2M100Tokenizer

    tokenizer = M2M100Tokenizer.from_pretrained(folder)
    own = {i: token for token, i in tokenizer.get_vocab().items()}  # vocab.json's: the specials, the model's pieces
    languages = {i: token for token, i in tokenizer.lang_token_to_id.items()}
    if sorted(own) != list(range(len(own))) or set(own) & set(languages):
        raise DataError(f"{where}: vocab.json does not number its pieces 0..{len(own) - 1} before the language codes")
    if max(languages, default=0) >= size:
        raise DataError(f"{where}: the tokenizer numbers tokens up to {max(languages)}, config.json's vocab_size "
                        f"is {size}")
    pieces = [own.get(i) or languages.get(i) or f"<unused{i}>" for i in range(size)]
    return pieces, pieces[len(own):]


def nllb_pieces(folder: Path, size: int, where: str) -> tuple[list[str], list[str]]:
    """NLLB's numbering (tokenizer.json: fairseq's specials, the sentencepiece model's pieces one
    further, the language codes `eng_Latn`, ... and <mask> after them), up to the model's `size`
    rows; and its added special tokens (dropped when decoding; the codes are its tags)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    ids = tokenizer.get_vocab(with_added_tokens=True)
    numbered = {i: token for token, i in ids.items()}
    if sorted(numbered) != list(range(len(numbered))) or len(numbered) > size:
        raise DataError(f"{where}: tokenizer.json does not number its {len(numbered)} tokens 0..{len(numbered) - 1} "
                        f"within config.json's vocab_size {size}")
    added = [t.content for _, t in sorted(tokenizer.get_added_tokens_decoder().items())
             if t.special and t.content not in ROLES]
    pieces = [numbered.get(i, f"<unused{i}>") for i in range(size)]
    return pieces, added + pieces[len(numbered):]


def read_m2m100(folder: Path, key: str = "model.init_from") -> tuple[dict, dict[str, torch.Tensor], Vocabularies]:
    """A local M2M-100 or NLLB-200 folder (as the hub serves facebook/m2m100_418M and
    facebook/nllb-200-distilled-600M) as (our model keys, our state_dict, our Vocabularies);
    errors name `key`."""
    where = f"{key}={folder}"
    architecture, state, config = read_m2m100_model(folder, where)
    vocabularies = m2m100_vocabularies(folder, config.src_vocab_size, where)
    if vocabularies.special_ids()["pad_id"] != config.pad_id:
        raise DataError(f"{where}: <pad> is {vocabularies.special_ids()['pad_id']} in the tokenizer, "
                        f"{config.pad_id} in config.json")
    return architecture, state, vocabularies


def read_m2m100_model(folder: Path, where: str) -> tuple[dict, dict[str, torch.Tensor], TransformerConfig]:
    """The folder's model as (our model keys, our state_dict, our TransformerConfig), read with
    transformers' own loader (safetensors or a weights-only pytorch_model.bin)."""
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    config = M2M100Config.from_pretrained(folder)
    architecture = m2m100_architecture(config, where)
    model = M2M100ForConditionalGeneration.from_pretrained(folder).eval()
    ours = TransformerConfig(src_vocab_size=config.vocab_size, tgt_vocab_size=config.vocab_size,
                             pad_id=config.pad_token_id, **architecture)
    state = {k: v.detach().float() for k, v in model.state_dict().items()}
    return architecture, from_m2m100_state(state, ours), ours
