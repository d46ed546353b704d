"""Target prefixes: outputs that start with a given text (task=translate task.prefix=true reads
them as `source<TAB>target prefix` lines: tasks/lines/reading.py).

A prefix passes the text rule every line passes (data/text.py: whitespace at its ends dropped, inner
runs one space), is encoded with the target tokenizer (no BOS, no EOS) and forced as the first
output tokens (decoding/search.py: TargetPrefix). The output's text is the prefix exactly as given,
then what follows the forced tokens' text in the decoded output: where the tokenizer normalizes the
prefix (NFKC, lowercasing, characters it cannot spell), the output still starts with the prefix.
A prefix that ends inside a word may be continued inside it ("Der Hu" -> "Der Hund ...").
"""

import logging

from transformer_mt.data.tokenizer import TextTokenizer, Vocabularies
from transformer_mt.errors import ConfigError, DataError

log = logging.getLogger(__name__)


def language_ids(vocabularies: Vocabularies, tag: str | None, source_lang: str | None, target_lang: str | None
                 ) -> tuple[list[int], list[int]]:
    """The ids put before every source (task.tag's or task.source_lang's) and those every output
    starts with (task.target_lang's); a code the vocabulary lacks, or both a tag and a source
    language, is a ConfigError naming the key."""
    source = vocabularies.source_prefix(source_tag(tag, source_lang), "task.source_lang" if source_lang else "task.tag")
    return source, vocabularies.target_prefix(target_lang, "task.target_lang")


def source_tag(tag: str | None, source_lang: str | None) -> str | None:
    """The token put before every source: task.source_lang's or task.tag's (both: a ConfigError)."""
    if tag and source_lang:
        raise ConfigError(f"task.tag={tag} and task.source_lang={source_lang} both name the token put before every "
                          "source: set one of the two")
    return source_lang or tag

def prefix_ids(tokenizer: TextTokenizer, prefixes: list[str], most: int, name: str,
               numbers: list[int]) -> list[list[int]]:
    """The target ids to force for each (cleaned) prefix; a prefix with a special token (<pad>,
    <s>, </s> written out) or longer than `most` tokens is a DataError naming `name:LINE`
    (numbers: the line of each prefix)."""
    special = {tokenizer.special_ids[key]: key for key in ("pad_id", "bos_id", "eos_id")}
    ids = tokenizer.encode(prefixes) if prefixes else []
    for tokens, number in zip(ids, numbers):
        found = next((t for t in tokens if t in special), None)
        if found is not None:
            raise DataError(f"{name}:{number}: the target prefix holds a special token ({special[found]} = "
                            f"{tokenizer.tokens([found])[0]}), which cannot be forced")
        if len(tokens) > most:
            raise DataError(f"{name}:{number}: the target prefix has {len(tokens)} tokens, more than the model's "
                            f"positions allow ({most})")
    return ids


def spell(tokenizer: TextTokenizer, sequences: list[list[int]], prefixes: list[str], forced: list[int]) -> list[str]:
    """The text of each token sequence, starting with its prefix as given (restore_prefix) where
    the sequence holds all `forced` (its number of forced tokens) of a non-empty prefix; otherwise
    the decoded text (no prefix, or a part of the forced tokens only)."""
    whole = [bool(prefix) and len(ids) >= n for ids, prefix, n in zip(sequences, prefixes, forced)]
    texts = tokenizer.decode(sequences)
    cut = [(ids[:n], ids[n:]) for ids, n, done in zip(sequences, forced, whole) if done]
    shown, rest = iter(tokenizer.decode([a for a, _ in cut])), iter(tokenizer.decode([b for _, b in cut]))
    return [restore_prefix(prefix, text, next(shown), next(rest)) if done else text
            for text, prefix, done in zip(texts, prefixes, whole)]


def restore_prefix(prefix: str, text: str, shown: str, rest: str) -> str:
    """The output starting with `prefix` as given: `text` (the whole output decoded) with its start
    `shown` (the forced tokens decoded alone) replaced by the prefix. A tokenizer whose decoding of
    the whole does not start with that of the forced tokens (none that this project trains or
    imports) gets the prefix, a space and `rest` (the tokens after the forced ones decoded alone)."""
    if text.startswith(shown):
        return prefix + text[len(shown) :]
    log.warning("the target tokenizer decodes the prefix %r otherwise inside the output %r: writing the prefix, "
                "a space and the rest", prefix, text)
    return f"{prefix} {rest}" if prefix and rest else prefix + rest
