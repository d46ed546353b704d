"""The server's API key (task.api_key): what a request presents, compared in constant time."""

import secrets

from fastapi import Request


def presented(request: Request, fields: dict | None = None) -> str:
    """The key a request presents: X-API-Key, or Authorization: Bearer, or (LibreTranslate's way)
    the `api_key` field of its body (`fields`)."""
    header = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
    return header or str((fields or {}).get("api_key") or "")


def authorized(given: str, key: str) -> bool:
    """Whether `given` is `key` (compared in constant time)."""
    return secrets.compare_digest(given.encode(), key.encode())
