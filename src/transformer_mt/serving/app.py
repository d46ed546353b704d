"""The FastAPI app: POST /translate (batched across requests, batcher.py), GET /models, /health,
/metrics (Prometheus' format, prometheus.py), the page at / and FastAPI's OpenAPI schema at /docs,
and the APIs integrators speak (other_apis.py: a LibreTranslate mount, POST /v1/translations). A
bad request is a 4xx with one JSON object naming the field and the limit, `{"error": ..., "field":
...}`, a model whose queue is full a 503 with Retry-After; the server goes on serving."""

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException

from transformer_mt.serving.api import (
    Limits,
    Output,
    RequestError,
    TranslateRequest,
    TranslateResponse,
    constraints_of,
    lines_of,
)
from transformer_mt.serving.batcher import Batcher, Joined, Pending, QueueFull
from transformer_mt.serving.bodies import body_error, invalid_json, not_an_object, unreadable_body
from transformer_mt.serving.decode import Work, decode_jobs, decode_running, joins, response
from transformer_mt.serving.middleware import KeyGuard, Measured
from transformer_mt.serving.other_apis import LIBRE, Directions, add_other_apis
from transformer_mt.serving.prometheus import ServerMetrics
from transformer_mt.serving.resident import ResidentModels
from transformer_mt.serving.sentences import Split
from transformer_mt.serving.served import ServedModel
from transformer_mt.serving.translation_cache import TranslationCache, decoded

PAGE = Path(__file__).with_name("page.html")
OPEN = ("/health",)  # the routes an API key does not guard (and the LibreTranslate mount: its own check)


@dataclass(frozen=True)
class Settings:
    """How the server batches and what it allows (task.max_tokens, max_wait_ms, the limits, api_key,
    max_queue, cache_lines, continuous_batching)."""

    max_tokens: int = 4096
    max_wait_ms: int = 5
    limits: Limits = Limits()
    api_key: str | None = None
    max_queue: int | None = 1024
    cache_lines: int = 10000
    continuous_batching: bool = False

    def for_sentences(self) -> "Settings":
        """These settings for a request split into sentences: as many lines as its characters allow."""
        return dataclasses.replace(self, limits=dataclasses.replace(self.limits, max_lines=self.limits.max_chars))


def validation_error(request: Request, err: RequestValidationError) -> JSONResponse:
    """Pydantic's first complaint as one line naming the field: a body that is no JSON object is
    `body`'s (invalid JSON a 400, bodies.py), the rest 422."""
    first = err.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
    if first.get("type") == "json_invalid":
        return body_error(invalid_json(str(err.body), first["loc"][-1], first.get("ctx", {}).get("error", "")), 400)
    if tuple(first.get("loc", ())) == ("body",) and first.get("type") in ("missing", "model_attributes_type"):
        return not_an_object(request, err.body, missing=first.get("type") == "missing")
    if first.get("type") == "extra_forbidden":
        message = f"{where}: no such field (the fields: {', '.join(TranslateRequest.model_fields)})"
    elif first.get("type") == "missing":
        message = f"{where}: required"
    else:
        message = f"{where}: {first.get('msg')}"
    return JSONResponse({"error": message, "field": where}, status_code=422)


def make_app(models: ResidentModels, settings: Settings, worker: ThreadPoolExecutor | None = None,
             concurrency: int = 1) -> FastAPI:
    """The app serving `models` (by name; the first is the default), decoding in `worker` (the
    threads that load them: batcher.decode_threads), `concurrency` batches at once."""
    metrics = ServerMetrics(models.names, lambda model: batcher.waiting_lines(model), settings.max_tokens)
    models.told = metrics.loaded
    joined = Joined(joins, decode_running) if settings.continuous_batching else None
    batcher = Batcher(decode_jobs, settings.max_tokens, settings.max_wait_ms, worker, concurrency, settings.max_queue,
                      metrics.batch, joined)
    translating = Translating(models, settings, batcher, TranslationCache(settings.cache_lines), metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="transformer-mt", summary="Translation with transformer-mt models", lifespan=lifespan)
    app.state.batcher, app.state.translating = batcher, translating
    answer_errors(app)

    if settings.api_key is not None:
        app.add_middleware(KeyGuard, key=settings.api_key, open_paths=OPEN, open_prefix=f"{LIBRE}/")
    app.add_middleware(Measured, told=metrics.request)  # the outermost: every answer counted, a 401 too

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> str:
        return PAGE.read_text(encoding="utf-8")

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "models": models.names}

    @app.get("/models")
    async def list_models() -> dict:
        return {"models": models.info()}

    @app.get("/metrics", include_in_schema=False)
    async def exposition() -> Response:
        content, media_type = metrics.exposition()
        return Response(content, media_type=media_type)

    @app.post("/translate", response_model=TranslateResponse, response_model_exclude_none=True)
    async def translate(body: TranslateRequest) -> TranslateResponse:
        return await translating(body)

    add_other_apis(app, Directions(models.declared), translating, settings.api_key)
    return app


class Translating:
    """POST /translate's work: a request's lines (or its sentences) checked, taken from the cache or
    decoded by the batcher, and its answer."""

    def __init__(self, models: ResidentModels, settings: Settings, batcher: Batcher, cache: TranslationCache,
                 metrics: ServerMetrics) -> None:
        self.models, self.settings, self.batcher, self.cache, self.metrics = models, settings, batcher, cache, metrics
        self.answered = 0  # requests answered with their translations

    async def __call__(self, body: TranslateRequest) -> TranslateResponse:
        served = await chosen(self.models, body.model)
        split = in_sentences(body, served, self.settings.limits) if body.split else None
        if split is not None:  # the sentences as lines: as many as the characters allow
            body = body.model_copy(update={"text": split.sentences, "split": False})
        job = batched(body, served, self.settings if split is None else self.settings.for_sentences())
        answer, cached = await decoded(job, self.batcher, self.cache)
        self.metrics.cached.labels(job.model).inc(cached)
        self.answered += 1
        out = response(job.model, answer, body)
        if split is None:
            return out
        limit = served.translator.max_positions
        notes = [f"text[{i}]: {n} sentence{'s' * (n > 1)} longer than the model's max_positions={limit} allows, cut "
                 "between words and translated piece by piece" for i, n in split.cut.items()]
        return TranslateResponse(model=out.model, notes=notes or None, translations=[
            Output(text=text) for text in split.joined([output.text for output in out.translations])])


def in_sentences(body: TranslateRequest, served: ServedModel, limits: Limits) -> Split:
    """The request's texts (checked against `limits`) split into sentences by the rules of its
    source_language (default: the model's source for its tag, else en); what split cannot give back
    (prefixes, constraints, n-best, scores, alignments) is a RequestError naming `split`."""
    lines, _ = lines_of(body, limits)
    if body.prefix is not None or body.constraints or (body.nbest or 1) > 1 or body.scores or body.alignments:
        raise RequestError("split", "split=true gives each text's translation only: no prefix, constraints, nbest, "
                                    "scores or alignments")
    tag = served.tag_of(body.tag, body.source_lang)
    sources = [source for (source, _), pair_tag in served.directions.items() if pair_tag == tag]
    prefix = served.source_prefix(tag)
    return Split.of(lines, body.source_language or (sources[0] if sources else "en"),
                    lambda sentence: served.pieces(sentence, prefix))


def batched(body: TranslateRequest, served: ServedModel, settings: Settings) -> Pending:
    """A request to `served` as the batcher's job: its lines (checked against the limits), how they
    decode, and the key of the requests that decode alike."""
    lines, prefixes = lines_of(body, settings.limits)
    constraints = constraints_of(body, len(lines))
    served.refuse_unsupported(constraints is not None, body.alignments)
    key, search = served.search(body, settings.limits, constrained=constraints is not None)
    tag = served.tag_of(body.tag, body.source_lang)
    source_prefix, target_prefix = served.source_prefix(tag), served.target_prefix(body.target_lang)
    sources = served.source_ids(lines, source_prefix)
    work = Work(served, search, prefixes, body.alignments, served.target_language(tag, target_prefix),
                settings.max_tokens, constraints, tuple(sources), target_prefix)
    return Pending((served.name, key, prefixes is not None, body.alignments, target_prefix), lines,
                   sum(map(len, sources)), work,
                   exclusive=body.alignments, model=served.name)  # the tag: each row's first token, no key


def answer_errors(app: FastAPI) -> None:
    """A request's faults answered as one JSON object naming the field: its body, its fields, a full queue."""
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, unreadable_body)
    app.add_exception_handler(RequestError, lambda request, err: JSONResponse(err.body(), status_code=err.status))
    app.add_exception_handler(QueueFull, queue_full)


def queue_full(request: Request, err: QueueFull) -> JSONResponse:
    """A 503 naming the model whose queue is full, with Retry-After: the seconds its queue takes."""
    return JSONResponse({"error": str(err), "field": "model"}, status_code=503,
                        headers={"Retry-After": str(err.retry_after)})


async def chosen(models: ResidentModels, name: str | None) -> ServedModel:
    """The model a request names (default: the first), loaded if it is not, or a 404 naming the served ones."""
    names = models.names
    if name is not None and name not in names:
        raise RequestError("model", f"model={name}: no such model; the models: {', '.join(names)}", status=404)
    return await models.get(names[0] if name is None else name)

