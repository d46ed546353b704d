"""Joint BPE with Hugging Face `tokenizers`: trained on the training split, saved as one JSON.

Pre-tokenization splits on whitespace (Metaspace, so decoding restores the spaces) and on
punctuation; decoding a hypothesis gives detokenized text ready for sacreBLEU.
"""

import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

log = logging.getLogger(__name__)

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]  # ids 0, 1, 2, 3


def train_bpe(lines: Iterable[str], vocab_size: int, min_frequency: int = 2, lowercase: bool = False) -> Tokenizer:
    """Train a BPE tokenizer on `lines` (source and target together for a joint vocabulary)."""
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    steps = [normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
    if lowercase:
        steps.append(normalizers.Lowercase())
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()])
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS, show_progress=False
    )
    tokenizer.train_from_iterator(lines, trainer=trainer)
    got = tokenizer.get_vocab_size()
    if got < vocab_size:
        log.warning("BPE vocabulary has %d tokens, fewer than the %d asked for (corpus too small)", got, vocab_size)
    return tokenizer


def special_ids(tokenizer: Tokenizer) -> dict[str, int]:
    """pad_id, bos_id, eos_id, unk_id of a tokenizer made by `train_bpe`."""
    names = ("pad_id", "bos_id", "eos_id", "unk_id")
    ids = {name: tokenizer.token_to_id(tok) for name, tok in zip(names, SPECIAL_TOKENS)}
    missing = [SPECIAL_TOKENS[i] for i, v in enumerate(ids.values()) if v is None]
    if missing:
        raise ValueError(f"tokenizer lacks the special tokens {missing}")
    return ids


def encode(tokenizer: Tokenizer, lines: list[str]) -> list[list[int]]:
    """Token ids of each line, without special tokens."""
    return [enc.ids for enc in tokenizer.encode_batch(lines, add_special_tokens=False)]


def decode(tokenizer: Tokenizer, ids: list[list[int]]) -> list[str]:
    """Detokenized text of each id sequence; special tokens are dropped."""
    return tokenizer.decode_batch(ids, skip_special_tokens=True)


def save_tokenizer(tokenizer: Tokenizer, path: str | Path) -> None:
    """Write atomically: a crash never leaves a half-written tokenizer file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(tokenizer.to_str())
    os.replace(tmp, path)


def load_tokenizer(path: str | Path) -> Tokenizer:
    return Tokenizer.from_file(str(path))
