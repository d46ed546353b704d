"""Subword vocabularies: BPE (`tokenizers`), sentencepiece (unigram or BPE), or an imported Marian
model's; one joint vocabulary for both languages, or one per side. Training them:
data/vocabulary_training.py; writing them as Hugging Face tokenizers: interop/hf_tokenizer.py.

Every vocabulary has <pad>, <s>, </s>, <unk> (ids 0-3 when we train it). Decoding restores the
spacing, so hypotheses are scored as plain text. `TextTokenizer` is what callers use; its classes
are BpeTokenizer, SentencePieceTokenizer and MarianVocabulary (an imported Marian model's).
"""

import base64
import json
import logging
import re
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import sentencepiece as spm
from tokenizers import Tokenizer

from transformer_mt.atomic import atomic_file
from transformer_mt.errors import ConfigError, DataError
from transformer_mt.validate import check

log = logging.getLogger(__name__)

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]  # ids 0, 1, 2, 3 in the vocabularies we train
ID_NAMES = ("pad_id", "bos_id", "eos_id", "unk_id")


TAG = re.compile(r"<?([A-Za-z0-9_.:-]+)>?")


ROLES = {PAD: "padding", BOS: "start-of-sentence", EOS: "end-of-sentence", UNK: "unknown-word"}


def tag_token(tag: str, key: str) -> str:
    """The vocabulary token of a corpus's tag (data.corpora.NAME.tag, task.tag): `bt` and `<bt>`
    both name the token `<bt>` (on the command line `task.tag=bt` needs no quotes). Anything but one
    word of letters, digits and _ . : - is a ConfigError naming `key`, and so is a tag that is one
    of the special tokens (`pad` would be <pad>, the padding the model masks)."""
    check(key, tag, lambda value: isinstance(value, str) and TAG.fullmatch(value) is not None,
          "one word of letters, digits and _ . : - (e.g. bt, which is the token <bt>)")
    name = TAG.fullmatch(tag)[1]
    token = f"<{name}>"
    if token in ROLES:
        raise ConfigError(f"{key}={tag}: {token} is the vocabulary's {ROLES[token]} token; a tag needs a token of its "
                          f"own (e.g. {key}={name}_tag)")
    return token


@dataclass(frozen=True)
class TokenizerOptions:
    """How vocabularies are made (conf/data: data.tokenizer.*)."""

    type: str = "bpe"  # bpe (Hugging Face tokenizers) | sentencepiece
    model_type: str = "unigram"  # sentencepiece only: unigram | bpe
    joint: bool = True  # one vocabulary for both sides, or one per side
    vocab_size: int = 8000
    min_frequency: int = 2  # bpe only
    character_coverage: float = 1.0  # sentencepiece only
    lowercase: bool = False
    normalization: str = "nfkc"  # nfkc | none
    file: str | None = None  # a tokenizer file to use instead of training (tokenizers .json or sentencepiece .model)
    tgt_file: str | None = None  # with joint=false: the target side's file
    # trained on at most this many training pairs (a fixed-seed sample; null: all of them)
    train_sample: int | None = 750_000
    dropout: float = 0.0  # subword regularization of the training split, each epoch (data/dropout.py)

    def to_dict(self) -> dict:
        return asdict(self)


class TextTokenizer(ABC):
    """One vocabulary: text to token ids and back, and its serialized forms (a checkpoint's dict, a
    file). `kind` names the class in the dicts checkpoints store; `model` is the library object."""

    kind: ClassVar[str]  # stored in to_dict()
    suffix: ClassVar[str]  # of the file save() writes

    def __init__(self, ids: list[int | None]) -> None:
        """`ids`: those of <pad>, <s>, </s>, <unk>, None where the vocabulary lacks the token."""
        missing = [tok for tok, i in zip(SPECIAL_TOKENS, ids) if i is None]
        if missing:
            raise DataError(f"the tokenizer has no {', '.join(missing)} token: it needs {', '.join(SPECIAL_TOKENS)}")
        self.special_ids: dict[str, int] = dict(zip(ID_NAMES, ids))

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """The number of ids."""

    @abstractmethod
    def encode(self, lines: list[str]) -> list[list[int]]:
        """Token ids of each line, without special tokens."""

    @abstractmethod
    def decode(self, ids: list[list[int]]) -> list[str]:
        """Detokenized text of each id sequence; special tokens are dropped."""

    @abstractmethod
    def tokens(self, ids: list[int]) -> list[str]:
        """The subword string of each id (for plots and CTranslate2)."""

    @abstractmethod
    def token_id(self, token: str) -> int:
        """The id of a subword string (unknown ones: <unk>)."""

    @abstractmethod
    def sentencepiece_model(self) -> bytes | None:
        """The sentencepiece model that cuts text into pieces (serialized); None for BPE."""

    def tag_tokens(self) -> list[str]:
        """The tags (<bt>, <copy>) the vocabulary holds beside its special tokens."""
        return []

    @abstractmethod
    def to_dict(self) -> dict[str, str]:
        """{"kind", "data"}: plain strings, for checkpoints (loadable with weights_only=True)."""

    @abstractmethod
    def to_bytes(self) -> bytes:
        """What save() writes."""

    def save(self, path: Path) -> None:
        """Write atomically: a crash never leaves a half-written tokenizer file."""
        payload = self.to_bytes()
        with atomic_file(path) as tmp:
            tmp.write_bytes(payload)

    def _shown_ids(self, ids: list[int]) -> list[int]:
        """`ids` without the special tokens decoding drops (all but <unk>)."""
        dropped = set(self.special_ids.values()) - {self.special_ids["unk_id"]}
        return [i for i in ids if i not in dropped]

    @staticmethod
    def from_dict(data: dict[str, str]) -> "TextTokenizer":
        """What to_dict gave; its "kind" picks the class."""
        if data["kind"] == BpeTokenizer.kind:
            return BpeTokenizer(Tokenizer.from_str(data["data"]))
        if data["kind"] == MarianVocabulary.kind:
            return MarianVocabulary.from_json(data["data"])
        if data["kind"] == SentencePieceTokenizer.kind:
            return SentencePieceTokenizer(spm.SentencePieceProcessor(model_proto=base64.b64decode(data["data"])))
        kinds = ", ".join((BpeTokenizer.kind, SentencePieceTokenizer.kind, MarianVocabulary.kind))
        raise DataError(f"a tokenizer of kind {data['kind']!r}: not one this version reads ({kinds})")

    @staticmethod
    def load(path: str | Path) -> "TextTokenizer":
        """A file save() wrote, a tokenizers JSON file or a sentencepiece model file, told apart by content."""
        path = Path(path)
        if not path.is_file():
            raise DataError(f"{path}: no such tokenizer file")
        data = path.read_bytes()
        if data.lstrip()[:10] == b'{"marian":':
            return MarianVocabulary.from_json(data.decode("utf-8"))
        if data.lstrip()[:1] == b"{":
            try:
                return BpeTokenizer(Tokenizer.from_str(data.decode("utf-8")))
            except Exception as err:
                raise DataError(f"{path}: not a valid tokenizers JSON file ({err})") from None
        try:
            return SentencePieceTokenizer(spm.SentencePieceProcessor(model_proto=data))
        except Exception:
            raise DataError(f"{path}: neither a tokenizers JSON file nor a sentencepiece model") from None


class BpeTokenizer(TextTokenizer):
    """A `tokenizers.Tokenizer` (what train_bpe makes, or a user's tokenizers JSON file). Text is
    encoded as text: a line that spells a special token or a tag (`</s>`, `<bt>`) gets the pieces
    of those characters, never the token's id (tags are put before a source as ids), as
    sentencepiece's control symbols are."""

    kind, suffix = "tokenizers", ".json"

    def __init__(self, model: Tokenizer) -> None:
        model.encode_special_tokens = True
        self.model = model
        super().__init__([model.token_to_id(tok) for tok in SPECIAL_TOKENS])

    @property
    def vocab_size(self) -> int:
        return self.model.get_vocab_size()

    def encode(self, lines: list[str]) -> list[list[int]]:
        return [enc.ids for enc in self.model.encode_batch_fast(lines, add_special_tokens=False)]  # no offsets

    def decode(self, ids: list[list[int]]) -> list[str]:
        return self.model.decode_batch(ids, skip_special_tokens=True)

    def tokens(self, ids: list[int]) -> list[str]:
        return [self.model.id_to_token(i) for i in ids]

    def token_id(self, token: str) -> int:
        found = self.model.token_to_id(token)
        return self.special_ids["unk_id"] if found is None else found

    def sentencepiece_model(self) -> None:
        return None

    def tag_tokens(self) -> list[str]:
        added = self.model.get_added_tokens_decoder().values()
        return [t.content for t in added if t.special and t.content not in ROLES and TAG.fullmatch(t.content)]

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "data": self.model.to_str()}

    def to_bytes(self) -> bytes:
        return self.model.to_str().encode()

class SentencePieceTokenizer(TextTokenizer):
    """A sentencepiece model (unigram or BPE), which numbers its pieces itself."""

    kind, suffix = "sentencepiece", ".model"

    def __init__(self, model: spm.SentencePieceProcessor) -> None:
        self.model = model
        ids = [model.pad_id(), model.bos_id(), model.eos_id(), model.unk_id()]
        super().__init__([None if i < 0 else i for i in ids])

    @property
    def vocab_size(self) -> int:
        return self.model.get_piece_size()

    def encode(self, lines: list[str]) -> list[list[int]]:
        return self.model.encode(lines)

    def decode(self, ids: list[list[int]]) -> list[str]:
        return self.model.decode([self._shown_ids(seq) for seq in ids])

    def tokens(self, ids: list[int]) -> list[str]:
        return [self.model.id_to_piece(i) for i in ids]

    def token_id(self, token: str) -> int:
        return self.model.piece_to_id(token)  # <unk>'s id for pieces it does not have

    def sentencepiece_model(self) -> bytes:
        return self.model.serialized_model_proto()

    def tag_tokens(self) -> list[str]:
        pieces = (self.model.id_to_piece(i) for i in range(self.vocab_size) if self.model.is_control(i))
        return [p for p in pieces if p not in ROLES and TAG.fullmatch(p)]

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "data": base64.b64encode(self.sentencepiece_model()).decode("ascii")}

    def to_bytes(self) -> bytes:
        return self.sentencepiece_model()

class MarianVocabulary(TextTokenizer):
    """A vocabulary of a sentencepiece model and a piece list (an imported model's): sentencepiece
    cuts the text into pieces, the list (vocab.json's order) numbers them, one list shared by the
    source and target sides. `start` is the token the decoder starts from: <pad> for Marian
    (OPUS-MT, which has no <s>; its embedding is zero), </s> for M2M-100. `added`: pieces beside the
    model's that decoding drops as it drops the specials (M2M-100's language codes: its tags)."""

    kind, suffix = "marian", ".marian"

    def __init__(self, spm_proto: bytes, pieces: list[str], start: str = PAD, added: list[str] = ()) -> None:
        self.proto, self.pieces, self.start, self.added = spm_proto, list(pieces), start, list(added)
        self.model = spm.SentencePieceProcessor(model_proto=spm_proto)
        self.ids = {piece: i for i, piece in enumerate(self.pieces)}
        super().__init__([self.ids.get(PAD), self.ids.get(start), self.ids.get(EOS), self.ids.get(UNK)])
        self.dropped = set(self.special_ids.values()) - {self.special_ids["unk_id"]} | {self.ids[p] for p in added}

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    def encode(self, lines: list[str]) -> list[list[int]]:
        unk = self.special_ids["unk_id"]
        return [[self.ids.get(p, unk) for p in self.model.encode(line, out_type=str)] for line in lines]

    def decode(self, ids: list[list[int]]) -> list[str]:
        return [self.model.decode_pieces(self.tokens([i for i in seq if i not in self.dropped])) for seq in ids]

    def tokens(self, ids: list[int]) -> list[str]:
        return [self.pieces[i] for i in ids]

    def tag_tokens(self) -> list[str]:
        return list(self.added)

    def token_id(self, token: str) -> int:
        return self.ids.get(token, self.special_ids["unk_id"])

    def sentencepiece_model(self) -> bytes:
        return self.proto

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "data": self.to_json()}

    def to_bytes(self) -> bytes:
        return self.to_json().encode()

    def to_json(self) -> str:
        data = {"spm": base64.b64encode(self.proto).decode("ascii"), "pieces": self.pieces}
        if self.start != PAD or self.added:  # an M2M-100 vocabulary's (a Marian one is written as before)
            data.update(start=self.start, added=self.added)
        return json.dumps({"marian": data}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "MarianVocabulary":
        data = json.loads(text)["marian"]
        return cls(base64.b64decode(data["spm"]), data["pieces"], data.get("start", PAD), data.get("added", []))

def tag_ids(tokenizer: TextTokenizer, tag: str | None, key: str) -> list[int]:
    """The ids of `tag` in `tokenizer` (Vocabularies.source_prefix); none without a tag."""
    if not tag:
        return []
    if tag in tokenizer.tag_tokens():  # a token of its own: an imported model's language code (`__en__`)
        return [tokenizer.token_id(tag)]
    token = tag_token(tag, key)
    found = tokenizer.token_id(token)
    if found == tokenizer.special_ids["unk_id"] or tokenizer.tokens([found]) != [token]:
        held = tokenizer.tag_tokens()
        raise ConfigError(f"{key}={tag}: the vocabulary has no token {token} (a vocabulary trained with tagged "
                          f"corpora has their tags; this one has {', '.join(held) if held else 'none'})")
    return [found]


class Vocabularies:
    """The source and target vocabularies (the same object when joint)."""

    def __init__(self, src: TextTokenizer, tgt: TextTokenizer | None = None) -> None:
        self.src, self.tgt = src, tgt or src
        if self.src.special_ids["pad_id"] != self.tgt.special_ids["pad_id"]:
            raise DataError("source and target vocabularies must give <pad> the same id")

    @property
    def joint(self) -> bool:
        return self.src is self.tgt

    def special_ids(self) -> dict[str, int]:
        """pad_id (shared), and the target's bos_id / eos_id / unk_id (what decoding emits)."""
        return {"pad_id": self.src.special_ids["pad_id"], **{k: self.tgt.special_ids[k] for k in ID_NAMES[1:]}}

    def encode_sources(self, lines: list[str], prefix: list[int] | tuple[int, ...] = ()) -> list[list[int]]:
        """The model's input ids of each source line: `prefix` (a tag's id), its tokens, then EOS."""
        eos, prefix = self.src.special_ids["eos_id"], list(prefix)
        return [prefix + ids + [eos] for ids in self.src.encode(lines)]

    def source_prefix(self, tag: str | None, key: str) -> list[int]:
        """The ids put before each source for `tag` (a corpus's, task.tag or task.source_lang: `bt`
        or `<bt>`): the token <bt>'s (a tag token the vocabulary spells otherwise, as M2M-100's
        `__en__`: itself), or none without a tag. A tag the source vocabulary lacks is a ConfigError
        naming `key`."""
        return tag_ids(self.src, tag, key)

    def target_prefix(self, tag: str | None, key: str) -> list[int]:
        """The ids every output starts with for `tag` (a corpus's target_tag, or task.target_lang:
        a target language's code, as NLLB's `deu_Latn`), as source_prefix on the target side."""
        return tag_ids(self.tgt, tag, key)

    def to_dict(self) -> dict:
        return {"src": self.src.to_dict(), "tgt": None if self.joint else self.tgt.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "Vocabularies":
        src = TextTokenizer.from_dict(data["src"])
        return cls(src, TextTokenizer.from_dict(data["tgt"]) if data.get("tgt") else None)

    def save(self, folder: Path) -> list[Path]:
        """src<suffix> (and tgt<suffix> when separate) in `folder`."""
        paths = [folder / f"src{self.src.suffix}"]
        self.src.save(paths[0])
        if not self.joint:
            paths.append(folder / f"tgt{self.tgt.suffix}")
            self.tgt.save(paths[1])
        return paths

    @classmethod
    def load(cls, folder: Path) -> "Vocabularies":
        files = {p.stem: p for p in folder.iterdir() if p.stem in ("src", "tgt")}
        return cls(TextTokenizer.load(files["src"]), TextTokenizer.load(files["tgt"]) if "tgt" in files else None)

    def same_as(self, other: "Vocabularies") -> bool:
        return self.to_dict() == other.to_dict()


