"""Tiny random M2M-100 and NLLB-200 folders as the hub serves them, built here with transformers
(no download): tests/interop/test_m2m100.py and test_language_codes.py share them."""

import json
from pathlib import Path

import pytest
import torch

TINY = dict(
    vocab_size=64,
    d_model=16,
    encoder_layers=2,
    decoder_layers=3,
    encoder_attention_heads=2,
    decoder_attention_heads=2,
    encoder_ffn_dim=32,
    decoder_ffn_dim=32,
    max_position_embeddings=40,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
    dropout=0.0,
)


def saved(folder: Path, **overrides) -> Path:
    """A random M2M100ForConditionalGeneration of TINY's shape saved in `folder` (safetensors)."""
    torch.manual_seed(0)
    transformers = pytest.importorskip("transformers")
    model = transformers.M2M100ForConditionalGeneration(transformers.M2M100Config(**{**TINY, **overrides}))
    model.eval().save_pretrained(folder)
    return folder


SAMPLE = [
    "A man rides a bicycle down the street.",
    "Ein Mann fährt mit dem Fahrrad die Straße hinunter.",
    "Un homme fait du vélo dans la rue.",
    "Двое мужчин играют в футбол.",
    "日本語のテキストです。",
    "Ελληνικά κείμενα εδώ.",
    "Zahlen: 1234 und 56,7 %",
    "Unbekannt: ☃ ∮ 🙂 ǅ",
    "  spaces   inside  ",
]


def sentencepiece_model(**ids) -> bytes:
    """A sentencepiece BPE model trained here on the multilingual sample (`ids`: its special ids)."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SAMPLE[:6] * 30), model_writer=model, vocab_size=120,
                                   model_type="bpe", character_coverage=1.0, hard_vocab_limit=False, minloglevel=2,
                                   **ids)
    return model.getvalue()


@pytest.fixture(scope="module")
def m2m100_folder(tmp_path_factory) -> Path:
    """A tiny random M2M-100 with its tokenizer as the hub serves one: a sentencepiece BPE model trained
    here on a multilingual sample, vocab.json numbering its pieces after the specials, M2M100Tokenizer's
    files; the model's rows the 100 language codes and 8 made-up words past vocab.json's (as m2m100_418M's)."""
    transformers = pytest.importorskip("transformers")
    import sentencepiece as spm

    folder = tmp_path_factory.mktemp("m2m100")
    model = sentencepiece_model(bos_id=-1, eos_id=-1, unk_id=0, pad_id=-1)
    (folder / "sentencepiece.bpe.model").write_bytes(model)
    processor = spm.SentencePieceProcessor(model_proto=model)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for piece in (processor.id_to_piece(i) for i in range(processor.get_piece_size())):
        vocab.setdefault(piece, len(vocab))
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = transformers.M2M100Tokenizer(str(folder / "vocab.json"), str(folder / "sentencepiece.bpe.model"))
    tokenizer.save_pretrained(folder)
    return saved(
        folder,
        vocab_size=max(tokenizer.lang_token_to_id.values()) + 1 + 8,  # 8 made-up words
        max_position_embeddings=256,
    )


NLLB_CODES = ["eng_Latn", "deu_Latn", "fra_Latn", "rus_Cyrl", "jpn_Jpan", "ell_Grek"]


@pytest.fixture(scope="module")
def nllb_folder(tmp_path_factory) -> Path:
    """A tiny random NLLB-200 folder as the hub serves one: sentencepiece.bpe.model (trained here),
    NllbTokenizer's tokenizer.json with language codes as special tokens after the pieces, and a
    model with one row per token."""
    transformers = pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("nllb")
    model = sentencepiece_model()
    (folder / "sentencepiece.bpe.model").write_bytes(model)
    tokenizer = transformers.NllbTokenizer.from_pretrained(folder)
    tokenizer.add_special_tokens({"additional_special_tokens": NLLB_CODES})
    tokenizer.save_pretrained(folder)
    return saved(folder, vocab_size=len(tokenizer))
