"""The text rule every sentence passes through (files, stdin, tables, the hub): UTF-8 without a BOM,
no NUL byte, no bare CR; whitespace and invisible characters stripped at both ends, inner runs of
whitespace one space. Errors name the file (or stream) and the line."""

import codecs
import re
import unicodedata

from transformer_mt.errors import DataError

_SPACE = re.compile(r"\s+")
_BARE_CR = re.compile(r"\r(?!\n)")


def text_lines(text: str) -> list[str]:
    """The lines of `text` without their LF / CRLF endings."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the trailing newline ends the last line, it does not start a new one
    return [line.removesuffix("\r") for line in lines]


def decode_text(data: bytes, name: str, first_line: int = 1, bom: bool = True) -> str:
    """UTF-8 text without a leading BOM (with `bom`: the start of a file); NUL bytes, invalid UTF-8 and
    bare CRs are `name:LINE:` errors (LINE counted from `first_line`, for text inside a stream)."""
    if bom:
        data = data.removeprefix(codecs.BOM_UTF8)
    nul = data.find(b"\0")
    if nul >= 0:
        raise DataError(f"{name}:{line_at(data, nul) + first_line - 1}: NUL byte (is this a binary file?)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = line_at(data, err.start) + first_line - 1
        raise DataError(f"{name}:{line}: invalid UTF-8 (byte {data[err.start]:#04x})") from None
    bare_cr = _BARE_CR.search(text)
    if bare_cr:
        raise DataError(f"{name}:{line_at(text, bare_cr.start()) + first_line - 1}: CR line ending (old Mac style); "
                        "convert the file to LF or CRLF line endings")
    return text


def line_at(data: bytes | str, position: int) -> int:
    """The line number (from 1) of the character or byte at `position`."""
    return data.count(b"\n" if isinstance(data, bytes) else "\n", 0, position) + 1


def invisible(char: str) -> bool:
    """Whitespace, or a format character (Unicode category Cf) that shows nothing by itself."""
    return char.isspace() or unicodedata.category(char) == "Cf"


def strip_invisible(line: str) -> str:
    """`line` without the whitespace and format characters at its two ends."""
    start, end = 0, len(line)
    while start < end and invisible(line[start]):
        start += 1
    while end > start and invisible(line[end - 1]):
        end -= 1
    return line[start:end]


def clean(lines: list[str]) -> tuple[list[str], int]:
    """Apply the text rule; return the lines and how many of them it changed."""
    out = [_SPACE.sub(" ", strip_invisible(line)) for line in lines]
    return out, sum(a != b for a, b in zip(lines, out))
