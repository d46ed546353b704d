"""A batch of requests decoded (in the batcher's worker thread): their lines as one call of
`translate_lines`, as task=translate decodes a file, split back by request; and a request's answer
from its lines' n-best lists."""

import dataclasses
from dataclasses import dataclass

from transformer_mt.decoding.strategy import Search
from transformer_mt.inference.line_translation import NBest, translate_lines
from transformer_mt.serving.api import Output, ScoredText, TranslateRequest, TranslateResponse
from transformer_mt.serving.batcher import Pending
from transformer_mt.serving.served import ServedModel


@dataclass(frozen=True)
class Work:
    """How a request's lines are decoded: the model, its search, target prefixes (None: none),
    alignments or not, the target language (None: no off-target flag), the batch's token budget, and
    each line's constraints and source ids (its tag's token first: a row's, not the batch's)."""

    served: ServedModel
    search: Search
    prefixes: list[str] | None
    alignments: bool
    language: str | None
    max_tokens: int
    constraints: list[list[str]] | None = None  # each line's phrases (None: none)
    sources: tuple[list[int], ...] = ()  # each line's source ids (served.source_ids: tokenized once)


@dataclass(frozen=True)
class Decoded:
    """A request's n-best lists, and whether each line's best output is off target (None: not known)."""

    nbests: list[NBest]
    off_target: list[bool | None]


def decode_jobs(jobs: list[Pending]) -> list[Decoded]:
    """Each job's lines decoded; the jobs share one key, so the first's Work says how (each job's
    source ids carry its own tag: requests in other directions of a model decode together)."""
    work: Work = jobs[0].payload
    lines = [line for job in jobs for line in job.lines]
    prefixes = None if work.prefixes is None else [p for job in jobs for p in job.payload.prefixes]
    constrained = any(job.payload.constraints for job in jobs)
    constraints = [c for job in jobs for c in (job.payload.constraints or [[] for _ in job.lines])] \
        if constrained else None
    translator = work.served.decoder.with_search(work.search)
    alignments = work.served.alignments() if work.alignments else None
    nbests = translate_lines(translator, lines, work.max_tokens, name="text", prefixes=prefixes,
                             alignments=alignments, constraints=constraints,
                             encoded=[ids for job in jobs for ids in job.payload.sources])
    out, start = [], 0
    for job in jobs:
        end = start + len(job.lines)
        mine = nbests[start:end]
        out.append(Decoded(mine, work.served.off_target([nbest[0].text for nbest in mine], job.payload.language)))
        start = end
    return out


def part(job: Pending, keep: list[int]) -> Pending:
    """The job of `job`'s lines numbered `keep`, with their prefixes, constraints and source ids."""
    work: Work = job.payload

    def picked(values: list | None) -> list | None:
        return None if values is None else [values[i] for i in keep]

    sources = tuple(work.sources[i] for i in keep)
    kept = dataclasses.replace(work, prefixes=picked(work.prefixes), constraints=picked(work.constraints),
                               sources=sources)
    return dataclasses.replace(job, lines=picked(job.lines), tokens=sum(map(len, sources)), payload=kept)


def line_keys(job: Pending) -> list[tuple | None]:
    """Each line's key in the translation cache: how the job decodes (its batch key: the model, the
    search, prefixes, alignments), the line's source ids (its tag's first), prefix and constraints;
    None for a search that samples (a line decodes otherwise each time)."""
    work: Work = job.payload
    if work.search.capabilities.random:
        return [None] * len(job.lines)
    prefixes = work.prefixes or [None] * len(job.lines)
    constraints = work.constraints or [[] for _ in job.lines]
    return [(job.key, tuple(ids), prefix, tuple(phrases))
            for ids, prefix, phrases in zip(work.sources, prefixes, constraints)]


def response(model: str, decoded: Decoded, request: TranslateRequest) -> TranslateResponse:
    """The answer to `request`: each line's best translation, and what it asked for (scores, the
    n-best, the alignment), and the off-target flag where the model has several target languages."""
    outputs = []
    for nbest, off in zip(decoded.nbests, decoded.off_target):
        best = nbest[0]
        outputs.append(Output(
            text=best.text, score=best.score if request.scores else None,
            nbest=[ScoredText(text=t.text, score=t.score) for t in nbest] if len(nbest) > 1 else None,
            alignment=best.alignment if request.alignments else None, off_target=off))
    return TranslateResponse(model=model, translations=outputs)
