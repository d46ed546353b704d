"""The APIs integrators already speak, over the same batching and cache as POST /translate: a
LibreTranslate mount (`/libretranslate/translate` and `/libretranslate/languages`, answering as
LibreTranslate's API does, so its clients and plugins work with `/libretranslate` as their base URL)
and `POST /v1/translations` (text, target_language, source_language: vLLM's text translation
route), each text split into sentences. A request names languages, not models: each served model's
training corpora say which (source, target) pairs it translates and with which source tag
(served.py: `directions`), or a multilingual model's language codes; a source given as `auto` (or
none) is identified by py3langid among the sources that reach the target."""

import itertools
import json
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from transformer_mt.serving.api import RequestError, TranslateRequest, TranslateResponse
from transformer_mt.serving.api_key import authorized, presented
from transformer_mt.serving.served import Declared

LIBRE = "/libretranslate"  # the LibreTranslate mount's base URL
NAMES = {"ar": "Arabic", "cs": "Czech", "de": "German", "en": "English", "es": "Spanish", "fi": "Finnish",
         "fr": "French", "hi": "Hindi", "it": "Italian", "ja": "Japanese", "ko": "Korean", "nl": "Dutch",
         "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "tr": "Turkish", "uk": "Ukrainian",
         "vi": "Vietnamese", "zh": "Chinese"}  # /languages' names (another code: the code itself)
Translated = Callable[[TranslateRequest], Awaitable[TranslateResponse]]


class Directions:
    """The served (source, target) pairs, each with the model and tag that translate it and the
    target code it forces (the first model listing a pair takes it): its training corpora's pairs,
    and for a multilingual model (M2M-100, NLLB-200) every pair of the languages its codes name
    (`__de__`, `deu_Latn`: de), the source code its tag."""

    def __init__(self, models: dict[str, Declared]) -> None:
        from transformer_mt.evaluation.off_target import language_codes  # py3langid: its model's languages

        self.pairs: dict[tuple[str, str], tuple[str, str | None, str | None]] = {}
        for served in models.values():
            coded = language_codes(served.codes) if served.codes else {}
            for (source, target), tag in served.directions.items():
                self.pairs.setdefault((source, target), (served.name, tag, coded.get(target)))
            for source, target in itertools.permutations(coded, 2):
                self.pairs.setdefault((source, target), (served.name, coded[source], coded[target]))

    def languages(self) -> list[dict]:
        """LibreTranslate's GET /languages: each source language, its name and its targets."""
        sources = sorted({source for source, _ in self.pairs})
        return [{"code": code, "name": NAMES.get(code, code),
                 "targets": sorted(target for source, target in self.pairs if source == code)} for code in sources]

    def pick(self, source: str | None, target: str, text: list[str], keys: tuple[str, str]) -> tuple:
        """(model, tag, source, confidence 0-100 or None) for `text` from `source` (None or auto:
        identified) into `target`; a RequestError naming the key (`keys`: the source's and target's)."""
        served = ", ".join(f"{s}-{t}" for s, t in self.pairs) or "none: no model's corpora name their languages"
        reaching = sorted(s for s, t in self.pairs if t == target)
        if not reaching:
            raise RequestError(keys[1], f"{keys[1]}={target}: no served model translates into it (the directions: "
                                        f"{served})", status=400)
        confidence = None
        if source in (None, "auto"):
            from transformer_mt.evaluation.off_target import identified  # py3langid: when a source is to find

            source, probability = identified(" ".join(text), tuple(reaching)) if len(reaching) > 1 else \
                (reaching[0], 1.0)
            confidence = round(100 * probability, 1)
        if (source, target) not in self.pairs:
            raise RequestError(keys[0], f"{keys[0]}={source}: no served model translates it into {target} (the "
                                        f"directions: {served})", status=400)
        model, tag, _ = self.pairs[source, target]
        return model, tag, source, confidence

    def target_code(self, source: str, target: str) -> str | None:
        """The code a picked pair forces as the first output token (None: none)."""
        return self.pairs[source, target][2]


class V1Request(BaseModel):
    """POST /v1/translations."""

    model_config = ConfigDict(extra="forbid")

    text: str | list[str] = Field(description="a text, or a list (one translation each)")
    target_language: str = Field(description="the language to translate into (ISO 639-1: de)")
    source_language: str | None = Field(None, description="the text's language; none or auto: identified")


def add_other_apis(app: FastAPI, directions: Directions, translated: Translated, api_key: str | None) -> None:
    """The LibreTranslate mount and POST /v1/translations on `app`, translating through `translated`."""

    @app.get(f"{LIBRE}/languages")
    async def libre_languages() -> list[dict]:
        return directions.languages()

    @app.post(f"{LIBRE}/translate")
    async def libre_translate(request: Request) -> JSONResponse:
        try:
            fields = await libre_fields(request)
            if api_key is not None and not authorized(presented(request, fields), api_key):
                return JSONResponse({"error": "Invalid API key"}, status_code=403)
            return JSONResponse(await libre_answer(fields, directions, translated))
        except RequestError as err:  # LibreTranslate's shape: {"error": ...}, 400
            return JSONResponse({"error": str(err)}, status_code=400 if err.status == 422 else err.status)

    @app.post("/v1/translations")
    async def v1_translations(body: V1Request) -> dict:
        lines = [body.text] if isinstance(body.text, str) else body.text
        model, tag, source, _ = directions.pick(body.source_language, body.target_language, lines,
                                                ("source_language", "target_language"))
        code = directions.target_code(source, body.target_language)
        answer = await translated(TranslateRequest(text=body.text, model=model, tag=tag, split=True,
                                                   source_language=source, target_lang=code))
        texts = [output.text for output in answer.translations]
        return {"model": model, "text": texts[0] if isinstance(body.text, str) else texts,
                "source_language": source, "target_language": body.target_language}


async def libre_fields(request: Request) -> dict:
    """The request's fields, sent as JSON or as a form (application/x-www-form-urlencoded)."""
    body = await request.body()
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        form = parse_qs(body.decode("utf-8", errors="replace"))
        return {name: values if name == "q" and len(values) > 1 else values[0] for name, values in form.items()}
    try:
        fields = json.loads(body or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RequestError("body", f"Invalid request: the body is neither JSON nor a form ({err})", 400) from None
    if not isinstance(fields, dict):
        raise RequestError("body", "Invalid request: send a JSON object, {\"q\": ..., \"source\": ..., "
                                   "\"target\": ...}", 400)
    return fields


async def libre_answer(fields: dict, directions: Directions, translated: Translated) -> dict:
    """LibreTranslate's answer to POST /translate's `fields`: translatedText (and detectedLanguage
    for source=auto, alternatives when asked)."""
    for name in ("q", "source", "target"):
        if fields.get(name) in (None, "", []):
            raise RequestError(name, f"Invalid request: missing {name} parameter", 400)
    if fields.get("format", "text") != "text":
        raise RequestError("format", f"format={fields['format']}: only text is translated here", 400)
    try:
        alternatives = int(fields.get("alternatives") or 0)
    except ValueError:
        alternatives = -1
    if alternatives < 0:
        raise RequestError("alternatives", f"alternatives={fields['alternatives']}: a number >= 0", 400)
    q = fields["q"]
    if not (isinstance(q, str) or (isinstance(q, list) and all(isinstance(line, str) for line in q))):
        raise RequestError("q", "Invalid request: q is a text or a list of texts", 400)
    lines = [q] if isinstance(q, str) else q
    model, tag, source, confidence = directions.pick(str(fields["source"]), str(fields["target"]), lines,
                                                     ("source", "target"))
    # a text split into sentences, but for alternatives: n-best lists of the whole text, as one line
    asked = {"beam_size": max(alternatives + 1, 4), "nbest": alternatives + 1} if alternatives else {
        "split": True, "source_language": source}
    try:
        request = TranslateRequest(text=q, model=model, tag=tag, **asked,
                                   target_lang=directions.target_code(source, str(fields["target"])))
    except ValidationError as err:
        raise RequestError("q", f"Invalid request: {err.errors()[0]['msg']}", 400) from None
    outputs = (await translated(request)).translations
    one = isinstance(q, str)
    answer: dict = {"translatedText": outputs[0].text if one else [o.text for o in outputs]}
    if confidence is not None:
        detected = {"confidence": confidence, "language": source}
        answer["detectedLanguage"] = detected if one else [detected] * len(outputs)
    if alternatives:
        others = [[n.text for n in (o.nbest or [])[1:]] for o in outputs]
        answer["alternatives"] = others[0] if one else others
    return answer
