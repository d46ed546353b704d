"""A text split into sentences (sentencex, Wikimedia's maintained multilingual splitter, by the
source language's rules) and put back together: each sentence is translated as a line of its own
(so the batcher and the cache see sentences, and a paragraph's sentences decode together), and each
text's translation keeps the whitespace between its sentences, line breaks included."""

from dataclasses import dataclass

from sentencex import segment


@dataclass(frozen=True)
class Split:
    """Texts as sentences: `sentences` (stripped, all texts end to end), each text's count, and the
    whitespace before and after each sentence."""

    sentences: list[str]
    counts: list[int]
    spaces: list[tuple[str, str]]

    @classmethod
    def of(cls, texts: list[str], language: str) -> "Split":
        sentences, counts, spaces = [], [], []
        for text in texts:
            pieces = [piece for piece in segment(language, text) if piece.strip()] or [text]
            counts.append(len(pieces))
            for piece in pieces:
                core = piece.strip()
                start = piece.index(core) if core else len(piece)
                sentences.append(core)
                spaces.append((piece[:start], piece[start + len(core):]))
        return cls(sentences, counts, spaces)

    def joined(self, translations: list[str]) -> list[str]:
        """Each text's translation: its sentences' translations with the text's whitespace around them."""
        out, start = [], 0
        for count in self.counts:
            parts = zip(translations[start:start + count], self.spaces[start:start + count])
            out.append("".join(before + text + after for text, (before, after) in parts))
            start += count
        return out
