"""Our vocabularies as Hugging Face tokenizers (`AutoTokenizer.from_pretrained(folder)` loads them):
a fast tokenizer for BPE, a MarianTokenizer for sentencepiece and for an imported Marian vocabulary.
Each adds EOS after every sentence, as our data pipeline does, and detokenizes as ours. Needs
`transformers`."""

import json
import tempfile
from pathlib import Path

from tokenizers import Tokenizer

from transformer_mt.data.tokenizer import (
    BOS,
    EOS,
    PAD,
    UNK,
    BpeTokenizer,
    MarianVocabulary,
    SentencePieceTokenizer,
    TextTokenizer,
)
from transformer_mt.errors import ConfigError


def save_hugging_face(source: TextTokenizer, target: TextTokenizer, folder: str | Path, max_positions: int) -> None:
    """Write the tokenizer of `source` (and `target`, the target side) into `folder`."""
    if isinstance(source, MarianVocabulary):
        save_marian_vocabulary(source, target, folder, max_positions)
    elif isinstance(source, BpeTokenizer):
        save_bpe(source, target, folder, max_positions)
    elif isinstance(source, SentencePieceTokenizer):
        save_sentencepiece(source, target, folder, max_positions)
    else:
        raise ConfigError(f"task.format=hf: no Hugging Face tokenizer for a {type(source).__name__}")


def save_bpe(source: BpeTokenizer, target: TextTokenizer, folder: str | Path, max_positions: int) -> None:
    """A fast tokenizer (tokenizer.json) that adds EOS after every sentence, as our data pipeline does."""
    check_one_vocabulary(source, target)
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer.from_str(source.model.to_str())  # a copy: ours keeps no post-processor
    tokenizer.post_processor = TemplateProcessing(single=f"$A {EOS}", pair=f"$A $B {EOS}",
                                                  special_tokens=[(EOS, source.special_ids["eos_id"])])
    settings = our_hugging_face_settings(max_positions)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, **settings).save_pretrained(folder)


def save_sentencepiece(source: SentencePieceTokenizer, target: TextTokenizer, folder: str | Path,
                       max_positions: int) -> None:
    """A MarianTokenizer: the model as source.spm and target.spm, and its pieces as vocab.json."""
    check_one_vocabulary(source, target)
    model = source.sentencepiece_model()
    save_marian_tokenizer(folder, model, model, source.tokens(list(range(source.vocab_size))),
                          **our_hugging_face_settings(max_positions))


def save_marian_vocabulary(source: MarianVocabulary, target: TextTokenizer, folder: str | Path,
                           max_positions: int) -> None:
    """A MarianTokenizer as the model came: source.spm, the target's target.spm, vocab.json, and
    Marian's settings (no <s>)."""
    save_marian_tokenizer(folder, source.proto, target.sentencepiece_model(), source.pieces, unk_token=UNK,
                          eos_token=EOS, pad_token=PAD, model_max_length=max_positions)


def check_one_vocabulary(source: TextTokenizer, target: TextTokenizer) -> None:
    """Marian models have one vocabulary for both sides: ours must be joint."""
    if target is not source:
        raise ConfigError("data.tokenizer.joint=false: Marian shares one vocabulary; task.format=hf needs a joint one")


def our_hugging_face_settings(max_positions: int) -> dict:
    """A Hugging Face tokenizer's special tokens, as ours, and detokenization as ours (no extra clean-up)."""
    return dict(bos_token=BOS, eos_token=EOS, unk_token=UNK, pad_token=PAD, model_max_length=max_positions,
                clean_up_tokenization_spaces=False)


def save_marian_tokenizer(folder: str | Path, source: bytes, target: bytes, pieces: list[str], **settings) -> None:
    """A MarianTokenizer (which adds EOS after every sentence): sentencepiece models for each side,
    and vocab.json numbering `pieces` in order."""
    from transformers import MarianTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / name for name in ("source.spm", "target.spm", "vocab.json")]
        files[0].write_bytes(source)
        files[1].write_bytes(target)
        files[2].write_text(json.dumps({piece: i for i, piece in enumerate(pieces)}, ensure_ascii=False),
                            encoding="utf-8")
        MarianTokenizer(*map(str, files), **settings).save_pretrained(folder)
