"""The HTTP door: Starlette routes over the one ToolService.

Auth modes (spec 5) are declared per route in ROUTE_MODES and applied by `identify`; every
error becomes a response in one place (`json_error` for JSON routes, `_error_text` for
POST /tools/{key}, which the plain-ASGI `ToolCall` serves); `Guard` is one pure-ASGI
middleware for Host/Origin checks, optional CORS and an access log that never shows an API key.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import re
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import formatting
from ..access import Access
from ..auth import key_from
from ..errors import (
    Forbidden,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    RequestTimeout,
    ToolFailed,
    ToolrunError,
    Unauthorized,
    UnsupportedMediaType,
    UsageError,
)
from ..metrics import CONTENT_TYPE, Metrics
from ..models import Identity
from ..service import ToolService
from ..settings import Settings

# GET /healthz, answered by the guard itself: the bytes JSONResponse({"status": "ok"}) would send.
HEALTHZ_BODY = b'{"status":"ok"}'
HEALTHZ_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-length", str(len(HEALTHZ_BODY)).encode()), (b"content-type", b"application/json")],
}
log = logging.getLogger("toolrun.server")
access_log = logging.getLogger("toolrun.access")

ROUTE_MODES = {
    "/healthz": "anonymous",
    "/readyz": "anonymous",
    "/metrics": "anonymous",
    "/openapi.json": "anonymous",
    "/whoami": "required",
    "/tools": "optional",
    "/tools/{key}": "optional",
    "/search": "optional",
    "/users": "admin",
}
MAX_PAGE = 100
_INTEGER = re.compile(r"-?[0-9]{1,100}")


@dataclass
class Backends:
    """Everything the routes need, built once by `toolrun serve` (or a test)."""

    service: ToolService
    settings: Settings
    access: Access
    metrics: Metrics
    checks: dict[str, Callable[[], Awaitable[None]]] = field(default_factory=dict)
    lifespans: list[Callable[[], Any]] = field(default_factory=list)
    extra_routes: list[BaseRoute] = field(default_factory=list)


# -- errors: the one table ----------------------------------------------------------------------


def json_error(exc: ToolrunError) -> JSONResponse:
    if isinstance(exc, Unauthorized):
        body = {"error": "unauthorized"}
    elif isinstance(exc, NotFound):
        body = {"error": "not found"}
    else:
        body = {"error": str(exc)}
    return JSONResponse(body, status_code=exc.http_status, headers=_retry_headers(exc))


def _error_text(exc: ToolrunError, debug: bool) -> str:
    """`Type: message`, or the traceback when DEBUG is on."""
    if debug:
        original = exc.original if isinstance(exc, ToolFailed) else exc
        return "".join(traceback.format_exception(original))
    return exc.summary


def _error_object(exc: ToolrunError, text: str) -> dict[str, Any]:
    """A POST /tools/{key} error asked for as JSON: `{error, type}` (the plain text's two halves)."""
    kind = type(exc.original).__name__ if isinstance(exc, ToolFailed) else type(exc).__name__
    message = text if text != exc.summary else (str(exc.original) if isinstance(exc, ToolFailed) else str(exc))
    body: dict[str, Any] = {"error": message, "type": kind}
    if isinstance(exc, RateLimited):
        body["retry_after"] = exc.retry_after
    return body


def _json_text(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)


def _retry_headers(exc: ToolrunError) -> dict[str, str]:
    if isinstance(exc, RateLimited):
        return {"Retry-After": str(exc.retry_after)}
    if exc.http_status == 503:
        return {"Retry-After": "1"}
    return {}


# -- request helpers ----------------------------------------------------------------------------


def _single(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise UsageError(f"query parameter {name!r} is given more than once")
    return values[0] if values else None


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = _single(request, name)
    if raw is None:
        return default
    if not _INTEGER.fullmatch(raw):  # ASCII digits only: int() would also take " 5", "5_0" and "٥"
        raise UsageError(f"query parameter {name!r} must be an integer, not {raw[:40]!r}")
    value = int(raw)
    if not low <= value <= high:
        raise UsageError(f"query parameter {name!r} must be between {low} and {high}")
    return value


def _choice(request: Request, name: str, choices: tuple[str, ...], default: str) -> str:
    """An enum query parameter, exactly as documented in /openapi.json (case-sensitive, never empty)."""
    raw = _single(request, name)
    if raw is None:
        return default
    if raw not in choices:
        expected = ", ".join(choices[:-1]) + f" or {choices[-1]}"
        raise UsageError(f"{name} must be {expected}, not {raw[:20]!r}")
    return raw


def _bool_param(request: Request, name: str) -> bool:
    return _choice(request, name, ("true", "false"), "false") == "true"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)


def parse_json_value(body: bytes) -> Any:
    """Any JSON value, by the one rule of every door: UTF-8, no NaN/Infinity, no duplicate keys."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"body is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        data = _DECODER.decode(text.lstrip("\ufeff"))
    except RecursionError:
        raise UsageError("malformed JSON: nested too deeply") from None
    except ValueError as exc:
        raise UsageError(f"malformed JSON: {exc}") from None
    return data


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The POST body: empty -> {}, else exactly one JSON object (no NaN, no duplicate keys).

    Only a body of zero bytes counts as empty: whitespace alone is not JSON."""
    if not body:
        return {}
    data = parse_json_value(body)
    if not isinstance(data, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(data), "a number")
        raise UsageError(f"body must be a JSON object of parameter name to value, not {kind}")
    return data


# -- the app --------------------------------------------------------------------------------------


class _ToolKey(Convertor[str]):
    """`{key:toolkey}`: the rest of the path, whatever it holds (`path` stops at a newline).

    Any text (slashes and newlines too) is a key: an odd one is an unknown key, with the route's own 404.
    """

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("toolkey", _ToolKey())


async def resolve_identity(access: Access, request: Request, mode: str) -> Identity:
    """Who is calling, per the auth mode (spec 5), for every HTTP door (REST routes and /mcp).

    Modes: anonymous, optional, required, admin. On
    every mode but anonymous a key that is given must resolve: an invalid, expired or revoked key
    is a 401, never an anonymous call. Raises Unauthorized; a key store that is down raises
    BackendUnavailable.
    """
    return await identity_from_scope(access, request.scope, mode)


async def identity_from_scope(access: Access, scope: Scope, mode: str) -> Identity:
    """`resolve_identity` on the raw ASGI scope (the hot path builds no Request or Headers)."""
    peer = scope.get("client")
    client = peer[0] if peer else ""
    if mode == "anonymous":
        return Identity(client=client)
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:  # names arrive lower-cased; the first occurrence counts
        if (name == b"x-api-key" or name == b"authorization") and name.decode() not in headers:
            headers[name.decode()] = value.decode("latin-1")
    query: Mapping[str, str] = {}
    if scope.get("query_string"):  # parsing an empty query string costs as much as the rest
        params = QueryParams(scope["query_string"])
        if len(params.getlist("api-key")) > 1:
            raise Unauthorized()  # an ambiguous ?api-key=a&api-key=b is refused, never half-read
        query = params
    return await access.identify(key_from(headers, query), mode, client)


def _is_json_media(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class ToolCall:
    """`POST /tools/{key}` as a plain ASGI app: the hot route, with no Request, Response or router.

    `Guard` hands it every POST under /tools/ directly; the router holds it too (for an app
    built without the guard). Every answer is plain text: the result, or the error table's text.
    """

    def __init__(self, backends: Backends) -> None:
        self.service = backends.service
        self.access = backends.access
        self.debug = backends.settings.debug
        self.max_body = backends.settings.max_body_bytes
        self.body_timeout = backends.settings.request_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> int:
        """Answer the call; returns the status sent."""
        key = scope["path"][len("/tools/") :]
        content_type: str | None = None
        length: bytes | None = None
        accept: bytes | None = None
        for name, value in scope["headers"]:  # the first occurrence counts, as everywhere else
            if name == b"content-type" and content_type is None:
                content_type = value.decode("latin-1")
            elif name == b"content-length" and length is None:
                length = value
            elif name == b"accept" and accept is None:
                accept = value
        content_type = content_type or ""
        # `Accept: application/json` (without text/plain) asks for the structured result and JSON
        # errors; every other client, browsers' */* included, gets the plain text of the spec.
        as_json = accept is not None and b"application/json" in accept and b"text/plain" not in accept
        headers: list[tuple[bytes, bytes]] = []
        media = b"text/plain; charset=utf-8"
        try:
            identity = await identity_from_scope(self.access, scope, "optional")
            self.service.describe(identity, key)
            body = await self.read_body(receive, length)
            if (body or content_type) and not _is_json_media(content_type):
                raise UnsupportedMediaType(content_type.split(";", 1)[0].strip().lower())
            args = parse_json_object(body)
            result = await self.service.call(identity, key, args)
            if as_json:
                status, text = 200, _json_text(formatting.call_payload(result))
            else:
                status, text = 200, formatting.result_text(result.value)
        except Unauthorized as exc:  # the same JSON body as on every other route
            status, text, media = exc.http_status, '{"error": "unauthorized"}', b"application/json"
        except ToolrunError as exc:
            status, text = exc.http_status, _error_text(exc, self.debug)
            headers = [(k.lower().encode(), v.encode()) for k, v in _retry_headers(exc).items()]
            if as_json:
                text = _json_text(_error_object(exc, text))
        except Exception as exc:
            log.exception("unexpected error calling %s", key)
            failed = ToolFailed(exc)
            status, text = failed.http_status, _error_text(failed, self.debug)
            if as_json:
                text = _json_text(_error_object(failed, text))
        data = text.encode("utf-8", "replace")  # a lone surrogate from an fn tool becomes "?", not a 500
        if as_json:
            media = b"application/json"
        headers += [(b"content-length", str(len(data)).encode()), (b"content-type", media)]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})
        return status

    async def read_body(self, receive: Receive, length: bytes | None) -> bytes:
        if length is not None:
            try:
                if int(length) > self.max_body:
                    raise PayloadTooLarge(self.max_body)
            except ValueError:
                raise UsageError("Content-Length is not a number") from None
        # uvicorn's receive() returns at once when the whole body has arrived (the common case: a small
        # body comes in the packet of the head); only a body still on its way needs the deadline. (`more_body`
        # is uvicorn's request cycle's own flag; any other server, or a later uvicorn without it, gets the deadline.)
        cycle = getattr(receive, "__self__", None)
        if getattr(cycle, "more_body", True) is False:
            return await self._read(receive)
        try:
            # asyncio.timeout, not wait_for: no task per request.
            async with asyncio.timeout(self.body_timeout):
                return await self._read(receive)
        except TimeoutError:
            raise RequestTimeout(self.body_timeout) from None

    async def _read(self, receive: Receive) -> bytes:
        chunks = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise UsageError("the client closed the connection before sending the whole body")
            chunks += message.get("body", b"")
            if len(chunks) > self.max_body:
                raise PayloadTooLarge(self.max_body)
            if not message.get("more_body", False):
                return bytes(chunks)


class Routes:
    def __init__(self, backends: Backends) -> None:
        self.b = backends
        self.service = backends.service
        self.settings = backends.settings
        self._metrics_nets = [ipaddress.ip_network(n, strict=False) for n in self.settings.metrics_allow_ips]

    # identity
    async def identify(self, request: Request, mode: str) -> Identity:
        return await resolve_identity(self.b.access, request, mode)

    # routes
    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        timeout = self.settings.readiness_timeout
        names = list(self.b.checks)
        results = await asyncio.gather(
            *(asyncio.wait_for(check(), timeout) for check in self.b.checks.values()), return_exceptions=True
        )
        failed = [(name, r) for name, r in zip(names, results, strict=True) if isinstance(r, BaseException)]
        for name, exc in failed:
            log.warning("readiness check %s failed: %s", name, type(exc).__name__ + (f": {exc}" if str(exc) else ""))
        if failed:
            return JSONResponse({"status": "degraded"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def whoami(self, request: Request) -> Response:
        try:
            identity = await self.identify(request, "required")
            tool_key = _single(request, "explain")
            user = _single(request, "user")
            if (tool_key is not None or user is not None) and not identity.is_admin:
                raise Unauthorized()  # explanations name hidden tools: admins only
        except ToolrunError as exc:
            return json_error(exc)
        body: dict[str, Any] = {
            "username": identity.username,
            "email": identity.email,
            "groups": sorted(identity.groups),
            "tools": [t.key for t in self.service.list(identity)],
        }
        if tool_key is not None:
            try:
                body["explain"] = await self.b.access.explain(
                    self.service,
                    user or identity.username,
                    tool_key,
                    limiter=self.service.limiter,
                    settings=self.settings,
                )
            except ToolrunError as exc:
                return json_error(exc)
        return JSONResponse(body)

    async def list_tools(self, request: Request) -> Response:
        try:
            identity = await self.identify(request, "optional")
            fmt = _choice(request, "format", ("json", "md", "html"), "json")
            paged = _single(request, "offset") is not None or _single(request, "limit") is not None
            offset = _int_param(request, "offset", 0, 0, 1_000_000)
            limit = _int_param(request, "limit", MAX_PAGE, 1, MAX_PAGE)
        except ToolrunError as exc:
            return json_error(exc)
        tools = self.service.list(identity)
        if paged:
            # Server pagination for the UI's empty box: the body stays the spec 2.1 array and
            # the page position travels in headers (X-Total-Count, X-Has-More, X-Next-Offset).
            window = tools[offset : offset + limit]
            has_more = offset + len(window) < len(tools)
            headers = {"X-Total-Count": str(len(tools)), "X-Has-More": "true" if has_more else "false"}
            if has_more:
                headers["X-Next-Offset"] = str(offset + len(window))
            tools = window
        else:
            headers = {}
        if fmt == "md":
            return PlainTextResponse(
                formatting.markdown_page(tools), media_type="text/markdown; charset=utf-8", headers=headers
            )
        if fmt == "html":
            return HTMLResponse(formatting.html_page(tools), headers=headers)
        return JSONResponse([t.entry() for t in tools], headers=headers)

    async def get_tool(self, request: Request) -> Response:
        try:
            identity = await self.identify(request, "optional")
            tool = self.service.describe(identity, request.path_params["key"])
        except ToolrunError as exc:
            return json_error(exc)
        return JSONResponse(tool.entry())

    async def users(self, request: Request) -> Response:
        try:
            await self.identify(request, "admin")
            with_keys = _bool_param(request, "keys")
        except ToolrunError as exc:
            return json_error(exc)
        return JSONResponse(await self.b.access.users(with_keys))

    async def metrics(self, request: Request) -> Response:
        # Anonymous by default. `metrics_allow_ips` and `metrics_token` protect it: the series name every
        # tool that was called, hidden ones included. Each one that is set must pass.
        if self._metrics_nets:
            peer = request.client.host if request.client else ""
            try:
                address = ipaddress.ip_address(peer)
            except ValueError:
                address = None
            if address is None or not any(address in net for net in self._metrics_nets):
                return JSONResponse({"error": "forbidden"}, status_code=403)
        token = self.settings.metrics_token
        if token:
            scheme, _, given = request.headers.get("authorization", "").strip().partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
                return JSONResponse(
                    {"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": 'Bearer realm="metrics"'}
                )
        return Response(self.b.metrics.render(), media_type=CONTENT_TYPE)

    async def search(self, request: Request) -> Response:
        try:
            identity = await self.identify(request, "optional")
            query = _single(request, "q")
            if query is None:
                query = _single(request, "query") or ""
            if len(query) > 500:
                raise UsageError("query parameter 'q' is longer than 500 characters")
            offset = _int_param(request, "offset", 0, 0, 1_000_000)
            limit = _int_param(request, "limit", 10, 1, MAX_PAGE)
        except ToolrunError as exc:
            return json_error(exc)
        page = self.service.search(identity, query, offset, limit)
        return JSONResponse(
            {
                "query": query,
                "items": [t.entry() for t in page.items],
                "total": page.total,
                "offset": page.offset,
                "limit": page.limit,
                "has_more": page.has_more,
                "next_offset": page.next_offset,
            }
        )

    async def openapi(self, request: Request) -> Response:
        from .openapi import document

        try:
            identity = await self.identify(request, "optional")
        except ToolrunError as exc:
            return json_error(exc)
        return JSONResponse(document(self.service.list(identity)))


def create_app(backends: Backends) -> Starlette:
    r = Routes(backends)
    tool_call = ToolCall(backends)
    routes: list[BaseRoute] = [
        # Tool calls first: the router tries routes in order, and this is the hot one.
        Route("/tools/{key:toolkey}", tool_call, methods=["POST"]),
        Route("/healthz", r.healthz, methods=["GET"]),
        Route("/readyz", r.readyz, methods=["GET"]),
        Route("/whoami", r.whoami, methods=["GET"]),
        Route("/tools", r.list_tools, methods=["GET"]),
        Route("/tools/{key:toolkey}", r.get_tool, methods=["GET"]),
        Route("/users", r.users, methods=["GET"]),
        Route("/metrics", r.metrics, methods=["GET"]),
        Route("/search", r.search, methods=["GET"]),
        Route("/openapi.json", r.openapi, methods=["GET"]),
        *backends.extra_routes,
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        async with AsyncExitStack() as stack:
            for factory in backends.lifespans:
                await stack.enter_async_context(factory())
            log.info("toolrun serving %d tools", len(backends.service))
            yield

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.backends = backends
    app.state.tool_call = tool_call
    from .fastpaths import ToolGet

    app.state.tool_get = ToolGet(backends)
    return app


# -- the guard middleware -------------------------------------------------------------------------


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


class Guard:
    """Host check (DNS rebinding), Origin check on unsafe methods, optional CORS, access log."""

    def __init__(
        self,
        app: ASGIApp,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        tool_call: ToolCall | None = None,
        tool_get: Any = None,
    ) -> None:
        self.app = app
        self.tool_call = tool_call
        self.tool_get = tool_get  # fastpaths.ToolGet
        self.any_host = "*" in allowed_hosts
        self.hosts = {h.lower() for h in allowed_hosts}
        self.origins = set(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        host, origin, hosts = "", None, 0
        for name, value in scope["headers"]:  # the two headers the guard reads (names arrive lower-cased)
            if name == b"host":
                host = value.decode("latin-1")
                hosts += 1
            elif name == b"origin":
                origin = value.decode("latin-1")
        method = scope["method"]
        status_holder = [0]

        async def send_logged(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder[0] = message["status"]
                if origin and origin in self.origins:
                    extra = [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin")]
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
                # The formatter escapes control characters (a `%0A` in the path cannot start a forged line);
                # `fields` are the JSON log's keys.
                fields = {"client": client[0], "method": method, "path": path, "query": query}
                access_log.info(
                    '%s "%s %s%s" %d %.1fms',
                    client[0],
                    method,
                    path,
                    query,
                    status_holder[0],
                    ms,
                    extra={"fields": {**fields, "status": status_holder[0], "ms": ms}},
                )

    def _origin_ok(self, origin: str, host: str, scope: Scope) -> bool:
        if origin in self.origins:
            return True
        scheme = scope.get("scheme", "http")
        return origin.lower() == f"{scheme}://{host}".lower()


def guarded(app: ASGIApp, settings: Settings) -> ASGIApp:
    state = getattr(app, "state", None)
    tool_call, tool_get = getattr(state, "tool_call", None), getattr(state, "tool_get", None)
    return Guard(app, list(settings.allowed_hosts), list(settings.allowed_origins), tool_call, tool_get)
