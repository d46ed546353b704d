"""A request body FastAPI cannot take, in the documented shape `{"error": ..., "field": "body"}`:
bytes that are not UTF-8 (the first bad byte and its offset), invalid JSON (where), JSON that is not
an object, an empty body, a body sent as another content type. FastAPI refuses them before any
route runs; these are the answers of the app's exception handlers."""

from fastapi import Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

KINDS = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
         float: "a number", type(None): "null"}
SEND = 'send a JSON object, {"text": ...}'


def body_error(message: str, status: int) -> JSONResponse:
    """The answer to a bad body: `message`, the field `body`, HTTP status `status`."""
    return JSONResponse({"error": message, "field": "body"}, status_code=status)


def not_utf8(body: bytes) -> str | None:
    """'the body is not UTF-8: byte 0xXX at offset N' for the first byte of `body` UTF-8 refuses."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"the body is not UTF-8: byte 0x{body[err.start]:02x} at offset {err.start}"
    return None


def invalid_json(text: str, position: int, why: str) -> str:
    """'invalid JSON: WHY at line L, column C (character P)' for the JSON `text` broken at `position`."""
    line = text.count("\n", 0, position) + 1
    column = position - text.rfind("\n", 0, position)
    return f"invalid JSON: {why} at line {line}, column {column} (character {position})"


def not_an_object(request: Request, body: object, missing: bool) -> JSONResponse:
    """The answer to a body that is no JSON object: empty (`missing`), sent as another content type
    (FastAPI then hands over its bytes), or JSON of another kind."""
    if missing:
        return body_error(f"the body is empty: {SEND}", 422)
    if isinstance(body, bytes):
        kind = request.headers.get("content-type") or "none"
        return body_error(f"the body is not sent as JSON (Content-Type: {kind}): send it as Content-Type: "
                          "application/json", 415)
    return body_error(f"the body is {KINDS.get(type(body), 'not an object')}, not a JSON object: {SEND}", 422)


async def unreadable_body(request: Request, err: HTTPException) -> JSONResponse:
    """FastAPI's HTTP errors: a body it could not parse (400: not UTF-8) in the documented shape, any
    other (a route that does not exist) as FastAPI gives it."""
    cause = err.__cause__
    if isinstance(cause, UnicodeDecodeError) and isinstance(cause.object, bytes):
        message = not_utf8(cause.object) or f"the body is not in a JSON encoding: {cause.reason} at offset " \
                                            f"{cause.start}"
        return body_error(message, 400)
    if err.status_code in (400, 413):
        return body_error(f"the body cannot be read: {err.detail}", err.status_code)
    return await http_exception_handler(request, err)
