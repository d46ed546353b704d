"""The JSON the server takes and gives: a translation request (every field declared, an unknown one
refused), its limits (task.max_lines, max_chars, max_beam), and the one-line error of a bad one."""

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SEARCHES = ("greedy", "beam")


class TranslateRequest(BaseModel):
    """POST /translate: one text or a list, and the decoding options of this request (each unset
    one is the served model's own, decoding=...'s)."""

    model_config = ConfigDict(extra="forbid")

    text: str | list[str] = Field(description="a line, or a list of lines (one translation each)")
    model: str | None = Field(None, description="a served model's name (GET /models); default: the first")
    search: Literal["greedy", "beam"] | None = Field(None, description="greedy or beam; default: beam when a beam "
                                                                        "option is given, else the model's")
    beam_size: int | None = Field(None, ge=1, description="beams (search=beam), up to task.max_beam")
    nbest: int | None = Field(None, ge=1, description="hypotheses per line, up to beam_size (search=beam)")
    length_penalty: float | None = Field(None, ge=0.0, le=10.0,
                                         description="alpha of score / length ** alpha (search=beam)")
    prefix: str | list[str] | None = Field(None, description="a target prefix each translation starts with (one "
                                                             "per line for a list)")
    constraints: list[str] | list[list[str]] | None = Field(
        None, description="phrases every translation must contain (beam search): a list for one text, a list "
                          "of lists (one per line) for a list")
    tag: str | None = Field(None, description="a source tag of the model's training corpora (a direction)")
    source_lang: str | None = Field(None, description="the source language's code as the model has it (__en__, "
                                                      "eng_Latn), put before the source (as tag; give one)")
    target_lang: str | None = Field(None, description="the target language's code (__de__, deu_Latn): every "
                                                      "translation starts with it; default: task.target_lang")
    scores: bool = Field(False, description="each translation's log-probability score")
    alignments: bool = Field(False, description="each translation's Pharaoh word alignment to its source")
    split: bool = Field(False, description="split each text into sentences, translated each as a line and put back "
                                           "together with the text's whitespace (the text's translation only)")
    source_language: str | None = Field(None, description="the texts' language, whose rules split them into "
                                                          "sentences; default: the model's source, else en")


class ScoredText(BaseModel):
    text: str
    score: float


class Output(BaseModel):
    """One line's translation, and what the request asked for."""

    text: str
    score: float | None = None
    nbest: list[ScoredText] | None = None
    alignment: str | None = None
    off_target: bool | None = Field(None, description="the output is in another of the model's target languages "
                                                      "(a model with several)")


class TranslateResponse(BaseModel):
    model: str
    translations: list[Output]
    notes: list[str] | None = Field(None, description="what the server did that the request did not ask for (a "
                                                      "sentence cut to fit the model)")


@dataclass(frozen=True)
class Limits:
    """What one request may ask for (task.max_lines, task.max_chars, task.max_beam)."""

    max_lines: int = 64
    max_chars: int = 10000
    max_beam: int = 16


class RequestError(ValueError):
    """A request the server refuses: `field` names what is wrong (`text`, `beam_size`, ...), the
    message says why and the limit; `status` is the HTTP status (422 by default)."""

    def __init__(self, field: str, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.field, self.status = field, status

    def body(self) -> dict:
        return {"error": str(self), "field": self.field}


def lines_of(request: TranslateRequest, limits: Limits) -> tuple[list[str], list[str] | None]:
    """The request's lines and target prefixes (None: none), checked against `limits`."""
    lines = [request.text] if isinstance(request.text, str) else list(request.text)
    if not lines:
        raise RequestError("text", "no line to translate (an empty list)")
    if len(lines) > limits.max_lines:
        raise RequestError("text", f"{len(lines)} lines, more than the {limits.max_lines} a request may send "
                                   "(task.max_lines)")
    chars = sum(map(len, lines))
    if chars > limits.max_chars:
        raise RequestError("text", f"{chars} characters, more than the {limits.max_chars} a request may send "
                                   "(task.max_chars)")
    if request.prefix is None:
        return lines, None
    prefixes = [request.prefix] * len(lines) if isinstance(request.prefix, str) else list(request.prefix)
    if len(prefixes) != len(lines):
        raise RequestError("prefix", f"{len(prefixes)} prefixes for {len(lines)} lines: one per line, or one string")
    return lines, prefixes


def constraints_of(request: TranslateRequest, lines: int) -> list[list[str]] | None:
    """Each line's constraint phrases (None: none), checked to match the lines."""
    given = request.constraints
    if not given:
        return None
    if all(isinstance(c, str) for c in given):
        if not isinstance(request.text, str):
            raise RequestError("constraints", "a list of lists for a list of texts: one list of phrases per line")
        found = [list(given)]
    elif isinstance(request.text, str) or len(given) != lines:
        raise RequestError("constraints", f"{len(given)} lists of phrases for {lines} lines: one per line")
    else:
        found = [list(c) for c in given]
    if any(not phrase.strip() for phrases in found for phrase in phrases):
        raise RequestError("constraints", "an empty phrase: each constraint is some text")
    return found


def checked_beam(request: TranslateRequest, search: str, beam_size: int, limits: Limits) -> tuple[int, int]:
    """(beam_size, nbest) of a request whose search is `search`, checked against `limits`
    (`beam_size`: the model's default)."""
    if search == "greedy":
        for name in ("beam_size", "nbest", "length_penalty"):
            if getattr(request, name) is not None and not (name != "length_penalty" and getattr(request, name) == 1):
                raise RequestError(name, f"{name} is an option of search=beam, not of greedy search")
        return 1, 1
    beam = request.beam_size or beam_size
    if beam > limits.max_beam:
        raise RequestError("beam_size", f"beam_size={beam}: more than the {limits.max_beam} the server allows "
                                        "(task.max_beam)")
    nbest = request.nbest or 1
    if nbest > beam:
        raise RequestError("nbest", f"nbest={nbest}: more than beam_size={beam}")
    return beam, nbest
