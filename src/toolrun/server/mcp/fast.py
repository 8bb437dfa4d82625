"""The fast path of `/mcp`: a plain `tools/call` answered without the SDK's per-request machinery.

The MCP SDK serves every request to `/mcp` through layers a one-shot JSON call does not need: a
Starlette Request, the body parsed again and validated by pydantic, and for handshake-era
clients a transport, memory streams, a JSON-RPC dispatcher and a task, all built per request.
Those layers cost a `tools/call` about as much as the whole of `POST /tools/{key}`.

`McpFastPath` sits in front of the SDK app, behind the two gates that already ran (the key gate
resolved the caller and read and checked the body; the session gate checked the `Mcp-Session-Id`
against its owner); it gets the request's head and the parsed body from them as arguments.
It answers a request only when it recognises it with certainty as one the SDK would dispatch
to the `tools/call` handler without complaint: a POST of one JSON-RPC request object,
JSON content type and an Accept that takes JSON, a known protocol version in the
`MCP-Protocol-Version` header, routing headers that agree with the body (2026-07-28), params
that pass the SDK's own per-version validation, and no middleware but the SDK's span middleware
(with a tracer configured, it is run here as the SDK runs it: the same span). Anything else
(batches, notifications, other methods, odd headers, an Accept of event streams only,
`Mcp-Param-*` headers, a missing version header) goes to the SDK unchanged.

What it runs is the SDK path minus the plumbing, with the same pieces: the SDK's checks
(transport security, Accept, the 2026-07-28 envelope ladder, per-version params validation),
the very `McpDoor.call_tool` handler the SDK calls (so identity, scoping, rate limits, sessions,
audit records under door `mcp-http`, metrics and secret handling are the ones every call
gets), the SDK's result serialisation for the negotiated version, and the SDK's own JSON-RPC
response models and encoders for each era. A differential test (tests/test_mcp_fast.py) holds
its answers byte-equal to the SDK's.

`TOOLRUN_SPEEDUPS=mcp_fast_path` (or `off`) in the server's environment turns it off (every request goes to the
SDK), for diagnosing a suspected difference.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

import pydantic_core
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import (
    InboundModernRoute,
    classify_inbound_request,
    validate_mcp_param_headers,
    x_mcp_header_map,
)
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import (
    INTERNAL_ERROR,
    SERVER_INFO_META_KEY,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCResponse,
    TextContent,
)
from mcp_types import methods as _methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from ...formatting import encodable
from ..request import UNPARSED, Head, Posted, body_message, replay
from .tasks import TaskMiddleware, unwrap

log = logging.getLogger("toolrun.mcp")

_HANDSHAKE = frozenset(HANDSHAKE_PROTOCOL_VERSIONS)
_MODERN = frozenset(MODERN_PROTOCOL_VERSIONS)
_ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_CALL_KEYS = frozenset({"name", "arguments", "_meta"})
_JSON_ACCEPT = frozenset({"*/*", "application/json", "application/*"})
_ROUTING = tuple((name.encode(), name) for name in ("mcp-protocol-version", "mcp-method", "mcp-name"))
_COMPACT = json.JSONEncoder(separators=(",", ":"))  # json.dumps(..., separators=(",", ":")), built once
_RESULT_FIELDS = frozenset({"content", "structured_content", "is_error"})
_TEXT_FIELDS = frozenset({"type", "text"})
_MEMO_MAX = 2048  # characters in one memo key
# The SDK's transport answer when it cannot encode a handshake-era response.
_POST_FAILED = (
    JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=INTERNAL_ERROR, message="Error handling POST request"))
    .model_dump_json(by_alias=True, exclude_unset=True)
    .encode()
)

try:  # The SDK's own pieces, some of them private: an SDK without them gets no fast path, never a wrong one.
    from mcp.server._otel import OpenTelemetryMiddleware
    from mcp.server._streamable_http_modern import _write as _modern_write
    from mcp.server.runner import ServerRunner, modern_error_data
    from opentelemetry import trace as _trace

    AVAILABLE = True
except ImportError:  # pragma: no cover
    AVAILABLE = False


def _tracing_off() -> bool:
    """True when no OpenTelemetry tracer provider is set: the SDK's span middleware then records nothing."""
    provider = _trace.get_tracer_provider()
    return isinstance(provider, (_trace.ProxyTracerProvider, _trace.NoOpTracerProvider))


class _Params:
    """The `tools/call` params the handler reads (the SDK passes its pydantic model; the door reads these two)."""

    __slots__ = ("arguments", "name")

    def __init__(self, name: str, arguments: dict[str, Any] | None) -> None:
        self.name = name
        self.arguments = arguments


class _Request:
    """What the door reads of the SDK's Starlette Request: `scope` (the identity the key gate left in its
    state) and `headers.get` of `mcp-session-id` and `x-request-id`, the first of each as Starlette gives it
    (the request is its own `headers`: no object more per call)."""

    __slots__ = ("given", "scope")

    def __init__(self, scope: Scope, given: Head) -> None:
        self.scope = scope
        self.given = given

    @property
    def headers(self) -> _Request:
        return self

    def get(self, name: str) -> str | None:
        return self.given.text(name.encode("latin-1"))


class _Context:
    """What `McpDoor.call_tool` reads of the SDK's request context: the HTTP request and the version."""

    __slots__ = ("meta", "protocol_version", "request", "session")

    def __init__(self, request: _Request, protocol_version: str, meta: Any = None) -> None:
        self.request = request
        self.protocol_version = protocol_version
        self.meta = meta  # the request's `_meta` (the door reads its baggage while tracing)
        self.session = None  # no standing channel on /mcp (McpDoor.remember skips it)


class _SpanContext:
    """What the SDK's span middleware reads of a request context: method, version, params, id and `_meta`."""

    __slots__ = ("meta", "method", "params", "protocol_version", "request_id")

    def __init__(self, version: str, params: dict[str, Any], request_id: Any) -> None:
        self.method = "tools/call"
        self.protocol_version = version
        self.params = params
        self.request_id = request_id
        self.meta = params.get("_meta")


class McpFastPath:
    """In front of the SDK's `/mcp` app: answers plain `tools/call` requests itself, passes the rest on."""

    def __init__(
        self,
        app: ASGIApp,
        server: Any,
        call_tool: Callable[[Any, Any], Any],
        security: TransportSecuritySettings | None,
        enabled: bool = True,
    ) -> None:
        self.app = app
        self.server = server
        self.call_tool = call_tool
        self.security = TransportSecurityMiddleware(security)
        self.enabled = enabled and AVAILABLE
        self.runner = ServerRunner(server, None, None) if self.enabled else None  # type: ignore[arg-type]
        self._schemas: dict[int, tuple[Any, bool]] = {}  # id(schema) -> (schema, refuses without headers)
        self._validated: dict[tuple[str, str, str | None], bool] = {}
        # Outcomes that depend on nothing but the strings they are keyed by, remembered (bounded):
        # the header checks of `_plain` (passes only), and per (routing headers, name, repr of `_meta`)
        # the version the 2026-07-28 ladder and validation route to (or None: the SDK answers).
        self._plain_ok: set[tuple[str | None, ...]] = set()
        self._modern: dict[tuple[Any, ...], str | None] = {}
        # The SDK deep-copies its serverInfo stamp per answer; this one is encoded at once and never kept.
        self._stamp = server.server_info_stamp if self.enabled else None

    async def serve(self, scope: Scope, receive: Receive, send: Send, given: Head, posted: Posted | None) -> None:
        """Answer a plain `tools/call` POST here, or pass the request on to the SDK. `given` is the request's head
        and `posted` the body the key gate read and parsed (None for GET and DELETE): both handed down, never
        read again."""
        if not self.enabled or posted is None:
            await self._sdk(scope, receive, send, posted)
            return
        version = self._version(given)
        if version in _MODERN:
            era = "modern"
        elif version in _HANDSHAKE:
            era = "handshake"
        else:  # no header (a 2025-03-26 default), one the SDK must judge, or Mcp-Param-* headers
            await self._sdk(scope, receive, send, posted)
            return
        request = _Request(scope, given)
        call = self._recognise(request, posted, era, version) if self._plain(given) else None
        if call is None:
            await self._sdk(scope, receive, send, posted)
            return
        request_id, params, protocol_version = call
        if log.isEnabledFor(logging.DEBUG):
            log.debug("MCP fast path: tools/call %s (%s)", params.get("name"), protocol_version)
        if era == "modern":
            await self._answer_modern(request, request_id, params, protocol_version, scope, receive, send)
        else:
            await self._answer_handshake(request, request_id, params, protocol_version, send)

    async def _sdk(self, scope: Scope, receive: Receive, send: Send, posted: Posted | None) -> None:
        """The SDK's app answers, with the body the key gate read handed back to it first."""
        await self.app(scope, receive if posted is None else replay(receive, body_message(posted[0])), send)

    @staticmethod
    def _version(given: Head) -> str:
        """The `MCP-Protocol-Version` header (the first counts, as Starlette's Headers.get, which the SDK reads
        it with, returns the first); "" with any `Mcp-Param-*` header, checked against the tool's schema by
        the SDK only."""
        if given.any_named(b"mcp-param-"):
            return ""
        return given.text(b"mcp-protocol-version") or ""

    def _plain(self, given: Head) -> bool:
        """The header checks the SDK makes before it reads a body, each passed (else the SDK answers)."""
        middleware = self.server.middleware
        if not middleware or type(middleware[0]) is not OpenTelemetryMiddleware:
            return False  # other middleware would see the call: the SDK runs it
        if any(type(m) is not TaskMiddleware for m in middleware[1:]):  # tasks.py's is applied here too (_result)
            return False
        content_type, accept = given.text(b"content-type"), given.text(b"accept")
        host, origin = given.text(b"host"), given.text(b"origin")
        key = (content_type, accept, host, origin)
        if key in self._plain_ok:  # a pure function of these four strings and the fixed settings
            return True
        if not self._headers_pass(content_type, accept, host, origin):
            return False  # not remembered: the SDK's checks log a refusal each time
        if _small(key):
            if len(self._plain_ok) >= 256:
                self._plain_ok.clear()
            self._plain_ok.add(key)
        return True

    def _headers_pass(self, content_type: str | None, accept: str | None, host: str | None, origin: str | None) -> bool:
        # The stricter of the SDK's two content-type checks (security: starts with application/json; the
        # handshake transport: exactly application/json before any `;`).
        if content_type is None or content_type.split(";", 1)[0].strip() != "application/json":
            return False
        # check_accept_headers: the answer is JSON, so the client must take JSON (or */*, application/*).
        types = [media.strip().split(";")[0].strip().lower() for media in (accept or "").split(",")]
        if not any(t in _JSON_ACCEPT for t in types):
            return False
        # TransportSecurityMiddleware.validate_request, past its content-type check.
        security = self.security
        return not security.settings.enable_dns_rebinding_protection or (
            security._validate_host(host) and security._validate_origin(origin)
        )

    def _recognise(
        self, request: _Request, posted: Posted, era: str, version: str
    ) -> tuple[Any, dict[str, Any], str] | None:
        """(request id, params, protocol version) of a plain `tools/call`, or None for the SDK."""
        body, decoded = posted
        try:
            # Each era parses as the SDK does (the 2026-07-28 entry with json, the handshake transport with
            # pydantic). The key gate parsed these very bytes with json already (stricter: no duplicate keys).
            if era == "handshake":
                decoded = pydantic_core.from_json(body)
            elif decoded is UNPARSED:
                decoded = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(decoded, dict) or not decoded.keys() <= _ENVELOPE_KEYS:
            return None
        request_id = decoded.get("id")
        params = decoded.get("params")
        if (
            decoded.get("jsonrpc") != "2.0"
            or type(decoded["jsonrpc"]) is not str
            or type(request_id) not in (int, str)
            or decoded.get("method") != "tools/call"
            or type(params) is not dict
            or not params.keys() <= _CALL_KEYS
            or type(params.get("name")) is not str
            or type(params.get("arguments", {})) is not dict
        ):
            return None
        if self.server.get_request_handler("tools/call") is None:
            return None
        if era == "modern":
            routed = self._route_modern(request.given, decoded, params)
            if routed is None:
                return None
            version = routed
            arguments = params.get("arguments") or {}
            if arguments and self._param_headers_refused(params["name"], arguments, request.scope):
                return None
        elif not self._valid(version, params):
            return None
        return request_id, params, version

    def _route_modern(self, given: Head, decoded: dict[str, Any], params: dict[str, Any]) -> str | None:
        """The version the SDK's 2026-07-28 envelope ladder routes a `tools/call` to, if its params then pass
        validation; None when either refuses (the SDK answers).

        The ladder reads the three routing headers, the method (here `tools/call`), the name and `_meta`;
        validation reads the version, the name and `_meta`: the outcome is remembered per those strings."""
        routing: dict[str, str] = {}
        for name, key in _ROUTING:
            value = given.get(name)
            if value is not None:
                if given.times(name) > 1:  # the SDK refuses a repeated routing header
                    return None
                routing[key] = value.decode("latin-1")
        meta = params.get("_meta")
        # repr tells 1, 1.0 and True apart (as the ladder and validation may); another key order is only another entry.
        memo_key = (tuple(sorted(routing.items())), params["name"], None if meta is None else repr(meta))
        if memo_key in self._modern:
            return self._modern[memo_key]
        # What dict(request.headers) would give for the three routing headers.
        verdict = classify_inbound_request(decoded, headers=routing)
        version = verdict.protocol_version if isinstance(verdict, InboundModernRoute) else None
        if version is not None and not self._valid(version, params):
            version = None
        _remember(self._modern, memo_key, version)
        return version

    def _valid(self, version: str, params: dict[str, Any]) -> bool:
        """Whether the SDK's per-version validation of `tools/call` params passes (else it answers INVALID_PARAMS).

        With only `name` (a string), `arguments` (an object: string keys, any values) and `_meta`, the outcome
        depends on the version, the name and `_meta` alone: it is remembered per those three."""
        meta = params.get("_meta")
        # repr tells 1, 1.0 and True apart (as validation may); another key order is only another entry.
        key = (version, params["name"], None if meta is None else repr(meta))
        known = self._validated.get(key)
        if known is None:
            try:
                _methods.validate_client_request("tools/call", version, params)
                known = True
            except Exception:  # the SDK answers INVALID_PARAMS (or METHOD_NOT_FOUND) in its own words
                known = False
            _remember(self._validated, key, known)
        return known

    def _param_headers_refused(self, name: str, arguments: dict[str, Any], scope: Scope) -> bool:
        """The SDK's `Mcp-Param-*` rung: the tool's schema against the arguments and headers.

        `_plain` let no `Mcp-Param-*` header through, so only a schema that declares header positions
        (`x-mcp-header`) can refuse; whether one does is remembered per schema object (the meta-tools'
        schemas are constants; a direct tool's is built per call and simply checked)."""
        schema = self.server.get_tool_input_schema(name)
        if schema is None:
            return False
        known = self._schemas.get(id(schema))
        if known is not None and known[0] is schema:
            return known[1]
        refused = validate_mcp_param_headers(schema, arguments, Request(scope).headers) is not None
        if not refused and not x_mcp_header_map(schema):
            if len(self._schemas) > 64:
                self._schemas.clear()
            self._schemas[id(schema)] = (schema, False)
        return refused

    async def _result(
        self, request: _Request, params: dict[str, Any], version: str, request_id: Any
    ) -> tuple[dict[str, Any], bool]:
        """The handler's result shaped for `version` as the SDK's serialiser shapes it, and whether it is
        plain JSON (the door's usual result, built directly by `_shape`)."""
        context = _Context(request, version, params.get("_meta"))
        arguments = _Params(params["name"], params.get("arguments"))
        if _tracing_off():  # the SDK's span middleware would record nothing
            result = await self.call_tool(context, arguments)
        else:  # the SDK's own span middleware makes the `tools/call` span, joined to `_meta`'s trace
            traced = _SpanContext(version, params, request_id)
            result = await self.server.middleware[0](traced, lambda _: self.call_tool(context, arguments))
        shaped = self._shape(result, version)
        if shaped is None:  # anything but the door's usual one-text result of plain JSON: the SDK's serialiser
            # A carried task (tasks.py) is answered in place of its carrier, as TaskMiddleware does on the SDK's road.
            return unwrap(self.runner._serialize("tools/call", version, result)), False  # type: ignore[union-attr]
        return shaped, True

    def _shape(self, result: Any, version: str) -> dict[str, Any] | None:
        """The SDK's wire form of the door's usual result (one text block, a structured object of plain JSON),
        built directly: the sieve's key order, `resultType` and the `serverInfo` stamp on 2026-07-28 answers."""
        if type(result) is not CallToolResult or len(result.content) != 1 or self.server.cache_hints.get("tools/call"):
            return None
        block = result.content[0]
        structured = result.structured_content
        if (
            type(block) is not TextContent
            or result.model_fields_set - _RESULT_FIELDS
            or block.model_fields_set - _TEXT_FIELDS
            or block.annotations is not None
            or block.meta is not None
            or result.meta is not None
            or type(result.is_error) is not bool
            or not encodable(block.text)
            or (structured is not None and not _plain_json(structured))
        ):
            return None
        shaped: dict[str, Any] = {"content": [{"text": block.text, "type": "text"}], "isError": result.is_error}
        modern = version in _MODERN
        if modern:
            shaped["resultType"] = "complete"
        if structured is not None:
            shaped["structuredContent"] = structured
        if modern:
            shaped["_meta"] = {SERVER_INFO_META_KEY: self._stamp}
        return shaped

    async def _answer_modern(
        self,
        request: _Request,
        request_id: Any,
        params: dict[str, Any],
        version: str,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        try:
            result, _ = await self._result(request, params, version, request_id)
        except Exception as exc:  # as the SDK's 2026-07-28 entry maps a failing handler
            error = JSONRPCError(jsonrpc="2.0", id=request_id, error=modern_error_data(exc))
            await _modern_write(error, scope, receive, send)
            return
        # What the SDK's `_write` sends for a JSONRPCResponse: its JSON-mode dump (the result is one
        # already, and the id is never None) through json.dumps, as a 200 application/json answer.
        data = _COMPACT.encode({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
        headers = [(b"content-length", str(len(data)).encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    async def _answer_handshake(
        self, request: _Request, request_id: Any, params: dict[str, Any], version: str, send: Send
    ) -> None:
        msg: JSONRPCResponse | JSONRPCError | None = None
        data = b""
        try:
            result, plain = await self._result(request, params, version, request_id)
            if plain:
                # The door's usual result (plain JSON: finite floats, no lone surrogate): pydantic's own
                # encoder over what the model would hold, in its field order, gives the model's dump
                # without building and validating the model.
                data = pydantic_core.to_json({"jsonrpc": "2.0", "id": request_id, "result": result})
            else:
                msg = JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
        except Exception as exc:  # as the SDK's JSON-RPC dispatcher maps a failing handler
            error = handler_exception_to_error_data(exc)
            if error is None:
                log.exception("handler for 'tools/call' raised")
                error = ErrorData(code=0, message=str(exc))
            msg = JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        status = 200
        if msg is not None:
            try:
                data = msg.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")
            except Exception:  # (a lone surrogate in a result) what the SDK's transport answers when its dump fails
                log.exception("Error handling POST request")
                status, data = 500, _POST_FAILED
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})


def _remember(memo: dict[Any, Any], key: tuple[Any, ...], value: Any) -> None:
    """Keep `value` under `key` when the key is small (`_small`); a full memo (1,024 entries) starts over."""
    if _small(key):
        if len(memo) >= 1024:
            memo.clear()
        memo[key] = value


def _small(key: tuple[Any, ...]) -> bool:
    """Whether a memo key is small enough to keep: a client's outsized `_meta`, name or headers (up to the body
    limit) are checked each time instead, so the memos stay a few megabytes at most."""
    return (
        sum(len(part) for part in key if isinstance(part, str))
        + sum(len(a) + len(b) for part in key if isinstance(part, tuple) for a, b in part)
        <= _MEMO_MAX
    )


def _plain_json(value: Any, depth: int = 0) -> bool:
    """JSON the SDK's JSON-mode dump returns unchanged: objects with string keys, lists, strings without lone
    surrogates, exact ints and bools, finite floats, null (no tuples, no NaN or infinity, no subclasses)."""
    kind = type(value)
    if kind is str:
        return encodable(value)
    if kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth > 100:
        return False
    if kind is dict:
        return all(type(k) is str and encodable(k) and _plain_json(v, depth + 1) for k, v in value.items())
    if kind is list:
        return all(_plain_json(v, depth + 1) for v in value)
    return False
