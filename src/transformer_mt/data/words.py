"""Which word of a text each of its subword tokens belongs to, words being what `str.split()` cuts
(for word alignments: links found between subwords, indices a reader can count)."""

from transformer_mt.data.tokenizer import TextTokenizer


def token_words(texts: list[str]) -> list[int]:
    """The word of each token, given texts[k], the text up to and including token k (the last one:
    the whole text): the words of that text, minus one, or the next word where that text ends in
    whitespace (a word-start mark alone); kept within the whole text's words (a token that shows
    nothing, such as <unk> where decoding drops it, joins a neighbour)."""
    last = max(len(texts[-1].split()) - 1, 0) if texts else 0
    words = (len(text.split()) - (0 if text[-1:].isspace() else 1) for text in texts)
    return [min(max(word, 0), last) for word in words]


def decoded_words(tokenizer: TextTokenizer, sequences: list[list[int]]) -> list[list[int]]:
    """token_words of each id sequence, its texts decoded by `tokenizer`."""
    texts = iter(tokenizer.decode([ids[: k + 1] for ids in sequences for k in range(len(ids))]))
    return [token_words([next(texts) for _ in ids]) for ids in sequences]


def source_words(tokenizer: TextTokenizer, lines: list[str], sequences: list[list[int]]) -> list[list[int]]:
    """For each line and its token ids (`tokenizer.encode`, no EOS), the word of the line each token
    belongs to. Exact where the line's tokens are those of its words encoded one by one (the
    tokenizers this project trains or imports never cut across a space), also for words the
    vocabulary cannot spell (<unk>); otherwise from the decoded tokens (decoded_words)."""
    words = [line.split() for line in lines]
    pieces = iter(tokenizer.encode([word for line in words for word in line]))
    out: list[list[int] | None] = []
    for line, ids in zip(words, sequences):
        cut = [next(pieces) for _ in line]
        same = [token for piece in cut for token in piece] == ids
        out.append([i for i, piece in enumerate(cut) for _ in piece] if same else None)
    missing = [i for i, found in enumerate(out) if found is None]
    for i, found in zip(missing, decoded_words(tokenizer, [sequences[i] for i in missing])):
        out[i] = found
    return out
