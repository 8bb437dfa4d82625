"""The HTTP door's span: one SERVER span per request, around the guard, only while tracing is on.

`guarded()` puts `Traced` in front of the guard when `telemetry.TRACING` is set at build time;
with tracing off the app is built without it, so the request path pays nothing. The span is
current while the guard and the routes run: the tool call's span is its child, and the access
log line (written by the guard) carries its trace id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .guard import scrub_keys
from .request import head
from .routes import ROUTES

if TYPE_CHECKING:
    from ..telemetry.otel import Tracing

# http.route: the route template a path matched (low cardinality), never the path itself.
_EXACT = frozenset({r.path for r in ROUTES if "{" not in r.path} | {"/mcp", "/ui", "/openapi.json"})
# The templates with a parameter (`/jobs/{id}/approve`), each as its segments; `{...}` takes one segment.
_TEMPLATES = tuple(
    (r.path, tuple(r.path.split("/"))) for r in ROUTES if "{" in r.path and not r.path.startswith("/tools/")
)


def route_of(path: str) -> str | None:
    """The route template `path` is served by, or None when no route takes it (a 404)."""
    if path in _EXACT:
        return path
    if path.startswith("/tools/") and len(path) > len("/tools/"):
        return "/tools/{key}"
    if path.startswith("/ui/"):
        return "/ui"
    parts = path.split("/")
    for template, segments in _TEMPLATES:
        if len(segments) == len(parts) and all(
            s == p or (s.startswith("{") and p) for s, p in zip(segments, parts, strict=True)
        ):
            return template
    return None


class Traced:
    """A SERVER span per HTTP request, joined to the caller's trace (traceparent, tracestate, baggage)."""

    def __init__(self, app: ASGIApp, tracing: Tracing) -> None:
        self.app = app
        self.tracing = tracing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        given = head(scope)  # parsed once for every layer (request.py)
        span = self.tracing.start_request(scope, given, scrub_keys(path) if "trk_" in path else path, route_of(path))
        status = 0

        async def send_traced(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        error: BaseException | None = None
        try:
            await self.app(scope, receive, send_traced)
        except BaseException as exc:
            error = exc
            raise
        finally:
            span.end(status, error)
