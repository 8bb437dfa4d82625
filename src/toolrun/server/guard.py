"""`Guard`: one pure-ASGI middleware for Host and Origin checks, optional CORS, and an access log that never
shows an API key. It routes nothing: the app it guards is the dispatcher (dispatch.py), which takes every
request by its route's row, whether it carries an Origin header or not."""

from __future__ import annotations

import logging
import re
import time
from urllib.parse import parse_qsl, urlencode

from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import telemetry
from ..errors import Forbidden
from .accesslog import access_line
from .disconnect import GONE
from .plain import STATUS, recording
from .request import head

access_log = logging.getLogger("toolrun.access")


# Anything shaped like an API key (auth.KEY_RE) keeps only its prefix in a log line: a key sent
# where no key belongs (`/tools/<key>`, `?x=1;api-key=<key>`) is not recognised by redact_query.
_KEY_SHAPE = re.compile(r"(trk_[a-z0-9]{10}_)[A-Za-z0-9_-]{20,}")


def scrub_keys(text: str) -> str:
    return _KEY_SHAPE.sub(r"\1[redacted]", text)


def redact_query(raw: bytes) -> str:
    """The query string for logs, with any api-key value (however encoded) replaced."""
    if not raw:
        return ""
    try:
        pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
    except ValueError:
        return "?[unparseable]"
    cleaned = [(k, "[redacted]" if k.strip().lower() == "api-key" else v) for k, v in pairs]
    return "?" + urlencode(cleaned, safe="[]")


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


# The answer headers a page of an allowed origin may read (the CORS-safelisted ones need no listing).
EXPOSE = (
    b"access-control-expose-headers",
    b"X-Toolrun-Exit-Code, Toolrun-Sandbox, X-Request-Id, Retry-After, X-Total-Count, X-Has-More, X-Next-Offset",
)


SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def with_cors(send: Send, origin: str) -> Send:
    """`send`, adding the CORS headers of an allowed `origin` to the answer's head."""
    extra = [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin"), EXPOSE]

    async def cors(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return cors


def preflight() -> Response:
    return Response(
        status_code=204,
        headers={
            "Access-Control-Allow-Methods": "GET, POST",
            "Access-Control-Allow-Headers": "Content-Type, X-API-Key, Authorization",
            "Access-Control-Max-Age": "600",
        },
    )


class Guard:
    """Host check (DNS rebinding), Origin check on unsafe methods, optional CORS, access log."""

    def __init__(self, app: ASGIApp, allowed_hosts: list[str], allowed_origins: list[str]) -> None:
        self.app = app
        self.any_host = "*" in allowed_hosts
        self.hosts = {h.lower() for h in allowed_hosts}
        self.origins = set(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        given = head(scope)  # parsed once for every layer (request.py); the first of each header counts
        host, origin, hosts = given.text(b"host") or "", given.text(b"origin"), given.times(b"host")
        if origin and origin in self.origins:
            send = with_cors(send, origin)
        try:
            answer = self.own_answer(scope, host, hosts, origin)
            if answer is None:
                await self.app(scope, receive, send)
            else:
                await answer(scope, receive, recording(scope, send))
        finally:
            if access_log.isEnabledFor(logging.INFO):
                log_request(scope, started)

    def own_answer(self, scope: Scope, host: str, hosts: int, origin: str | None) -> Response | None:
        """The guard's own answer (a refusal, or a CORS preflight), or None: the request goes on."""
        if hosts > 1:  # which one counts differs between servers and proxies: refuse the ambiguity
            return PlainTextResponse("Duplicate Host header", status_code=400)
        if not self.any_host and _host_name(host) not in self.hosts:
            return PlainTextResponse("Invalid host header", status_code=400)
        if not origin:
            return None
        method = scope["method"]
        if method not in SAFE_METHODS and not self._origin_ok(origin, host, scope):
            exc = Forbidden(f"cross-origin request from {origin[:100]!r} is not allowed")
            return PlainTextResponse(exc.summary, status_code=403)
        if method == "OPTIONS" and origin in self.origins:
            return preflight()
        return None

    def _origin_ok(self, origin: str, host: str, scope: Scope) -> bool:
        if origin in self.origins:
            return True
        scheme = scope.get("scheme", "http")
        return origin.lower() == f"{scheme}://{host}".lower()


def log_request(scope: Scope, started: float) -> None:
    """The access log's line of a request: its status is the one the app left in the scope (plain.STATUS)."""
    client = scope.get("client") or ("-", 0)
    path = scope.get("path", "")
    if "trk_" in path:
        path = scrub_keys(path)
    raw_query = scope.get("query_string", b"")
    query = scrub_keys(redact_query(raw_query)) if raw_query else ""
    ms = round((time.perf_counter() - started) * 1000, 1)
    status = 499 if scope.get(GONE) else scope.get(STATUS, 0)  # a call cancelled: its client went away
    access_line(client[0], scope["method"], path, query, status, ms, telemetry.current_trace_id())
