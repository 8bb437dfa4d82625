"""`Guard`: one pure-ASGI middleware for Host and Origin checks, optional CORS, and an access log
that never shows an API key. Without an Origin header, the hot routes (POST /tools/{key}, GET /healthz,
GET /tools/{key}, POST /mcp) go straight to their handlers: the `hot_routes` speedup (speedups.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import speedups, telemetry
from ..errors import (
    Forbidden,
    ToolrunError,
)
from ..settings import Settings
from .disconnect import GONE
from .errors import json_error
from .logs import access_line
from .request import head
from .toolcall import ToolCall

log = logging.getLogger("toolrun.server")
access_log = logging.getLogger("toolrun.access")


# GET /healthz, answered by the guard itself: the bytes JSONResponse({"status": "ok"}) would send.
HEALTHZ_BODY = b'{"status":"ok"}'
HEALTHZ_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-length", str(len(HEALTHZ_BODY)).encode()), (b"content-type", b"application/json")],
}


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
    b"X-Toolrun-Exit-Code, X-Request-Id, Retry-After, X-Total-Count, X-Has-More, X-Next-Offset",
)


class Guard:
    """Host check (DNS rebinding), Origin check on unsafe methods, optional CORS, access log."""

    def __init__(
        self,
        app: ASGIApp,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        tool_call: ToolCall | None = None,
        tool_get: Any = None,
        mcp: Any = None,
    ) -> None:
        self.app = app
        self.tool_call = tool_call
        self.tool_get = tool_get  # fastpaths.ToolGet
        self.mcp = mcp  # run.McpKeyGate, the /mcp endpoint
        self.any_host = "*" in allowed_hosts
        self.hosts = {h.lower() for h in allowed_hosts}
        self.origins = set(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        given = head(scope)  # parsed once for every layer (request.py)
        host, origin, hosts = given.text(b"host") or "", given.text(b"origin"), given.times(b"host")
        method = scope["method"]
        status_holder = [0]

        async def send_logged(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder[0] = message["status"]
                if origin and origin in self.origins:
                    extra = [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin"), EXPOSE]
                    message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        try:
            if hosts > 1:  # which one counts differs between servers and proxies: refuse the ambiguity
                await PlainTextResponse("Duplicate Host header", status_code=400)(scope, receive, send_logged)
                return
            if not self.any_host and _host_name(host) not in self.hosts:
                await PlainTextResponse("Invalid host header", status_code=400)(scope, receive, send_logged)
                return
            if origin and method not in ("GET", "HEAD", "OPTIONS") and not self._origin_ok(origin, host, scope):
                exc = Forbidden(f"cross-origin request from {origin[:100]!r} is not allowed")
                await PlainTextResponse(exc.summary, status_code=403)(scope, receive, send_logged)
                return
            if origin is None and self.tool_call is not None and not scope.get("root_path"):
                # The hot routes, straight to their handlers: no router, no wrapped send (no CORS to add).
                path = scope["path"]
                if method == "POST" and path.startswith("/tools/"):
                    status_holder[0] = await self.tool_call.handle(scope, receive, send)
                    return
                if method == "GET" and path == "/healthz":
                    status_holder[0] = 200
                    await send(HEALTHZ_START)
                    await send({"type": "http.response.body", "body": HEALTHZ_BODY})
                    return
                if method == "GET" and self.tool_get is not None and path.startswith("/tools/"):
                    status_holder[0] = await self.tool_get.handle(scope, receive, send)
                    return
                if method == "POST" and path == "/mcp" and self.mcp is not None:
                    await self._mcp(scope, receive, send_logged, status_holder)
                    return
            if method == "OPTIONS" and origin and origin in self.origins:
                preflight = Response(
                    status_code=204,
                    headers={
                        "Access-Control-Allow-Methods": "GET, POST",
                        "Access-Control-Allow-Headers": "Content-Type, X-API-Key, Authorization",
                        "Access-Control-Max-Age": "600",
                    },
                )
                await preflight(scope, receive, send_logged)
                return
            await self.app(scope, receive, send_logged)
        except asyncio.CancelledError:
            # uvicorn cancels the calls still running once `shutdown_grace` is over (each tool's
            # process group is killed on the way out): answer if nothing was sent yet, and end
            # quietly rather than with uvicorn's "Exception in ASGI application" traceback.
            if status_holder[0] == 0:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await PlainTextResponse(
                        "ShuttingDown: the server stopped before the call finished; retry",
                        status_code=503,
                        headers={"Retry-After": "1", "Connection": "close"},
                    )(scope, receive, send_logged)
            log.warning("%s %s cancelled: the server is shutting down", method, scope.get("path", ""))
        finally:
            if access_log.isEnabledFor(logging.INFO):
                client = scope.get("client") or ("-", 0)
                path = scope.get("path", "")
                if "trk_" in path:
                    path = scrub_keys(path)
                raw_query = scope.get("query_string", b"")
                query = scrub_keys(redact_query(raw_query)) if raw_query else ""
                ms = round((time.perf_counter() - started) * 1000, 1)
                status = 499 if scope.get(GONE) else status_holder[0]  # a call cancelled: its client went away
                access_line(client[0], method, path, query, status, ms, telemetry.current_trace_id())

    async def _mcp(self, scope: Scope, receive: Receive, send: Send, status: list[int]) -> None:
        """POST /mcp without the router; a ToolrunError that escapes gets the app's JSON answer, as routed."""
        try:
            await self.mcp(scope, receive, send)
        except ToolrunError as exc:
            if status[0]:
                raise
            await json_error(exc)(scope, receive, send)

    def _origin_ok(self, origin: str, host: str, scope: Scope) -> bool:
        if origin in self.origins:
            return True
        scheme = scope.get("scheme", "http")
        return origin.lower() == f"{scheme}://{host}".lower()


def guarded(app: ASGIApp, settings: Settings) -> ASGIApp:
    state = getattr(app, "state", None)
    tool_call, tool_get = getattr(state, "tool_call", None), getattr(state, "tool_get", None)
    mcp = getattr(state, "mcp_endpoint", None)
    if not speedups.on("hot_routes"):  # every request through the router (speedups.py)
        tool_call = tool_get = mcp = None
    guard = Guard(app, list(settings.allowed_hosts), list(settings.allowed_origins), tool_call, tool_get, mcp)
    if telemetry.TRACING is None:
        return guard
    from .tracing import Traced

    return Traced(guard, telemetry.TRACING)
