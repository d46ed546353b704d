"""A checkpoint's lexical table (decoding.shortlist, task=shortlist) as CTranslate2's vocabulary map:
the model folder's vmap.txt, which CTranslate2 reads with the model and applies per batch when
translate_batch is given use_vmap=True.

Its format (CTranslate2's src/vocabulary_map.cc): one line per source token, the source token, a TAB,
then its candidate target tokens separated by spaces; a line whose source is empty lists the target
tokens every batch may emit (here the frequent ones and the tags: CTranslate2 adds <unk>, <s> and
</s> itself). Subword tokens never hold a space or a TAB (sentencepiece's and our BPE's mark spaces
with ▁); one that did could not be written, and is left out."""

import logging
from pathlib import Path

from transformer_mt.atomic import atomic_file
from transformer_mt.data.tokenizer import Vocabularies

log = logging.getLogger(__name__)

VMAP = "vmap.txt"


def writable(token: str) -> bool:
    """Whether a token can stand in vmap.txt (no space, TAB or line break in it)."""
    return token != "" and not any(c in token for c in " \t\r\n")


def vmap_lines(table: dict, vocabularies: Vocabularies) -> list[str]:
    """The lines of vmap.txt for a table read by read_shortlist: the common tokens first (an empty
    source), then each source token that has candidates."""
    tgt = vocabularies.tgt
    tags = [tgt.token_id(token) for token in tgt.tag_tokens()]
    common = [t for t in tgt.tokens([*table["frequent_ids"], *tags]) if writable(t)]
    lines = ["\t" + " ".join(common)]
    sources = [s for s, row in enumerate(table["table"]) if row]
    for source, token in zip(sources, vocabularies.src.tokens(sources)):
        targets = [t for t in tgt.tokens(table["table"][source]) if writable(t)]
        if writable(token) and targets:
            lines.append(token + "\t" + " ".join(targets))
    return lines


def write_vmap(folder: Path, table: dict, vocabularies: Vocabularies) -> None:
    """vmap.txt in the CTranslate2 model folder `folder`, of a checkpoint's lexical table (as
    checkpoints/shortlist_file.py's read_shortlist gives it), written atomically when it differs."""
    text = "\n".join(vmap_lines(table, vocabularies)) + "\n"
    target = folder / VMAP
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        with atomic_file(target) as tmp:
            tmp.write_text(text, encoding="utf-8")
        log.info("the lexical table written as CTranslate2's vocabulary map %s", target)
