"""A text split into sentences (sentencex, Wikimedia's maintained multilingual splitter, by the
source language's rules) and put back together: each sentence is translated as a line of its own
(so the batcher and the cache see sentences, and a paragraph's sentences decode together), and each
text's translation keeps the whitespace between its sentences, line breaks included."""

from collections.abc import Callable
from dataclasses import dataclass, field

from sentencex import segment


@dataclass(frozen=True)
class Split:
    """Texts as sentences: `sentences` (stripped, all texts end to end), each text's count, the
    whitespace before and after each sentence, and the texts with a sentence cut to fit the model
    (by text: its sentences cut)."""

    sentences: list[str]
    counts: list[int]
    spaces: list[tuple[str, str]]
    cut: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, texts: list[str], language: str, fit: Callable[[str], list[str]] = lambda s: [s]) -> "Split":
        """`fit(sentence)`: the sentence as pieces the model takes (itself where it fits)."""
        split = cls([], [], [])
        for i, text in enumerate(texts):
            pieces = [piece for piece in segment(language, text) if piece.strip()] or [text]
            split.counts.append(0)
            for piece in pieces:
                core = piece.strip()
                start = piece.index(core) if core else len(piece)
                split.add(i, fit(core) if core else [core], piece[:start], piece[start + len(core):])
        return split

    def add(self, text: int, parts: list[str], before: str, after: str) -> None:
        """A sentence of text `text` as its `parts` (joined again by a space), with its whitespace."""
        self.sentences.extend(parts)
        self.counts[text] += len(parts)
        if len(parts) == 1:
            self.spaces.append((before, after))
        else:
            self.spaces.extend([(before, "")] + [(" ", "")] * (len(parts) - 2) + [(" ", after)])
            self.cut[text] = self.cut.get(text, 0) + 1

    def joined(self, translations: list[str]) -> list[str]:
        """Each text's translation: its sentences' translations with the text's whitespace around them."""
        out, start = [], 0
        for count in self.counts:
            parts = zip(translations[start:start + count], self.spaces[start:start + count])
            out.append("".join(before + text + after for text, (before, after) in parts))
            start += count
        return out
