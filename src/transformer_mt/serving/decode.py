"""A batch of requests decoded (in the batcher's worker thread): their lines as one call of
`translate_lines`, as task=translate decodes a file, split back by request; and a request's answer
from its lines' n-best lists."""

import dataclasses
from dataclasses import dataclass

from transformer_mt.decoding.running_batch import RunningBatch
from transformer_mt.decoding.search import Hypothesis
from transformer_mt.decoding.strategy import Search
from transformer_mt.inference.line_translation import NBest, Translation, translate_lines
from transformer_mt.inference.prefix import spell
from transformer_mt.serving.api import Output, ScoredText, TranslateRequest, TranslateResponse
from transformer_mt.serving.batcher import Inbox, Pending
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
    target_prefix: tuple[int, ...] = ()  # the target language's code every output starts with (part of the key)


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
                             encoded=[ids for job in jobs for ids in job.payload.sources],
                             target_prefix=list(work.target_prefix))
    out, start = [], 0
    for job in jobs:
        end = start + len(job.lines)
        mine = nbests[start:end]
        out.append(Decoded(mine, work.served.off_target([nbest[0].text for nbest in mine], job.payload.language)))
        start = end
    return out


def joins(job: Pending) -> bool:
    """Whether a job decodes in a running batch (decoding/running_batch.py): greedy search by our
    engine on one Transformer that takes it, without prefixes (a target code's too), constraints,
    alignments or a shortlist."""
    work: Work = job.payload
    engine, search = work.served.decoder, work.search
    declared = search.capabilities
    if engine is not work.served.translator or declared.beams or declared.random or declared.constraints:
        return False
    if work.prefixes is not None or work.target_prefix or work.alignments or work.constraints or search.shortlist:
        return False
    translator = work.served.translator
    return translator.shortlist is None and not search.options.static(translator.device) and \
        RunningBatch.takes(translator.model(), search.options)


ADMIT_WAIT = 4  # steps a sentence handed to a running batch waits, at most, for others to join with it


def decode_running(jobs: list[Pending], inbox: Inbox) -> None:
    """`jobs` and those the inbox hands over, decoded as one running batch, each job answered
    through the inbox once its lines ended (the text and score greedy search gives it in any batch),
    until no row is left and none is handed over. Jobs handed over join between two steps, several
    at once (one encoder call): when they are a quarter of the rows decoding, when none is, or
    after ADMIT_WAIT steps."""
    work: Work = jobs[0].payload
    translator = work.served.translator
    running = RunningBatch(translator.model(), work.search.options, translator.bos_id, translator.eos_id)
    outputs: dict[int, list] = {}  # each job's lines' outputs so far, by id
    owned: dict[int, Pending] = {}
    new, held, waited = jobs, [], 0
    while True:
        admit(running, new, owned, outputs, inbox)
        for (key, i), hypothesis in running.step():
            outputs[key][i] = hypothesis
            ended(owned[key], outputs, inbox)
        held += inbox.take()
        if held and (not running.rows or 4 * len(held) >= running.rows or waited >= ADMIT_WAIT):
            new, held, waited = held, [], 0
        else:
            new, waited = [], waited + bool(held)
        if not running.rows and not new and not held and inbox.close():
            return


def admit(running: RunningBatch, jobs: list[Pending], owned: dict[int, Pending], outputs: dict[int, list],
          inbox: Inbox) -> None:
    """The lines of `jobs` into the running batch (an empty line: an empty output at once)."""
    rows: list[tuple[tuple[int, int], list[int]]] = []
    for job in jobs:
        owned[id(job)], outputs[id(job)] = job, [None] * len(job.lines)
        for i, ids in enumerate(job.payload.sources):
            if ids:
                rows.append(((id(job), i), ids))
            else:
                outputs[id(job)][i] = Hypothesis([], 0.0, 0.0)
    running.admit([ids for _, ids in rows], [owner for owner, _ in rows])
    for job in jobs:
        ended(job, outputs, inbox)


def ended(job: Pending, outputs: dict[int, list], inbox: Inbox) -> None:
    """`job` answered where each of its lines has its hypothesis."""
    mine = outputs.get(id(job))
    if mine is None or any(h is None for h in mine):
        return
    del outputs[id(job)]
    work: Work = job.payload
    texts = spell(work.served.translator.tokenizer.tgt, [h.tokens for h in mine], [""] * len(mine), [0] * len(mine))
    nbests = [[Translation(text, h.score)] for text, h in zip(texts, mine)]
    inbox.answered(job, Decoded(nbests, work.served.off_target(texts, work.language)))


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
