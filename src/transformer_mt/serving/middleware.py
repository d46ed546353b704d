"""The server's two HTTP middlewares, as plain ASGI ones (Starlette's `BaseHTTPMiddleware` runs each
request in a task group of its own: under 64 clients its cancel scopes were 17% of the event loop's
time): every answer counted with its latency (the metrics), and the API key asked of every route but
the open ones."""

import time
from collections.abc import Awaitable, Callable

from fastapi import Request
from fastapi.responses import JSONResponse

from transformer_mt.serving.api_key import authorized, presented

App = Callable[[dict, Callable, Callable], Awaitable[None]]  # an ASGI app


class Measured:
    """Tells `told(path, status, seconds)` of each HTTP answer (a request that fails unanswered: 500)."""

    def __init__(self, app: App, told: Callable[[str, int, float], None]) -> None:
        self.app, self.told = app, told

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.monotonic(), 500

        async def sending(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.told(scope["path"], status, time.monotonic() - started)


class KeyGuard:
    """Answers 401 to a request without `key` on every path but `open_paths` and those under
    `open_prefix` (the LibreTranslate mount: its own check)."""

    def __init__(self, app: App, key: str, open_paths: tuple[str, ...], open_prefix: str) -> None:
        self.app, self.key, self.open_paths, self.open_prefix = app, key, open_paths, open_prefix

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path not in self.open_paths and not path.startswith(self.open_prefix) \
                and not authorized(presented(Request(scope)), self.key):
            refused = JSONResponse({"error": "a valid API key is needed (header X-API-Key: KEY, or Authorization: "
                                             "Bearer KEY)", "field": "X-API-Key"}, status_code=401)
            return await refused(scope, receive, send)
        await self.app(scope, receive, send)
