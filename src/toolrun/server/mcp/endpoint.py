"""The /mcp endpoint of the HTTP server: `mount_mcp` puts the MCP door on the app (the SDK's streamable-HTTP
manager, the fast path of plain `tools/call`, the session gate), and `McpKeyGate` checks what /mcp checks before
any of that runs (the key, duplicate session headers, the body).
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from ... import speedups
from ...access import Access, Mode
from ...errors import PayloadTooLarge, ToolrunError
from ...models import Identity
from ...state import McpSessionStore, SharedState
from ..httperrors import json_error
from ..parts import ServerParts
from ..request import UNPARSED, Head, Posted, head, identity_from_scope, is_json_media, parse_json_value, read_body

if TYPE_CHECKING:
    from .sessions import McpSessionGate


def mount_mcp(parts: ServerParts, mcp_sessions: McpSessionStore | None = None) -> None:
    """The MCP streamable-HTTP endpoint at /mcp, on the same app, port and ToolService.

    Served statelessly by the SDK (any worker or replica answers any request); the handshake era's
    sessions are toolrun's own, in the shared store (see mcp/sessions.py)."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    from .door import McpDoor, build_server
    from .fast import McpFastPath
    from .sessions import McpSessionGate

    settings = parts.settings

    def identify(ctx: Any) -> Identity:
        # McpKeyGate resolved the caller (asynchronously) and left it in the request's state.
        request = getattr(ctx, "request", None)
        state = request.scope.get("state", {}) if request is not None else {}
        identity = state.get("toolrun_identity")
        return identity if isinstance(identity, Identity) else Identity()

    from .stream import StreamHub

    sessions = mcp_sessions if mcp_sessions is not None else SharedState(settings).mcp_sessions()
    door = McpDoor(parts.service, identify, direct=settings.mcp_direct, approval_round=settings.mcp_approval_round)
    streams = StreamHub(
        sessions,
        keepalive=settings.mcp_stream_keepalive,
        write_timeout=settings.request_timeout,
        max_streams=settings.mcp_max_streams,
        per_caller=settings.mcp_max_streams_per_caller,
    )
    server = build_server(door, list_changed=True, listen=streams.listen)
    if parts.reloader is not None:
        parts.reloader.listeners.append(door.catalog_changed)
        parts.reloader.listeners.append(streams.catalog_changed)  # GET /mcp and subscriptions/listen streams
    hosts = list(settings.allowed_hosts)
    if "*" in hosts:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    else:
        host_patterns = sorted({h if h.startswith("[") or ":" not in h else f"[{h}]" for h in hosts})
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[p for h in host_patterns for p in (h, f"{h}:*")],
            allowed_origins=[
                *settings.allowed_origins,
                *(
                    f"{scheme}://{h}{port}"
                    for h in host_patterns
                    for scheme in ("http", "https")
                    for port in ("", ":*")
                ),
            ],
        )
    manager = StreamableHTTPSessionManager(
        app=server,
        security_settings=security,
        max_request_body_size=settings.max_body_bytes,
        stateless=True,
        # Answers as one JSON body, not an event stream: a call's result is the only message toolrun sends,
        # and a stream costs a task group, a memory channel and SSE framing per request.
        json_response=True,
    )
    parts.lifespans.append(manager.run)
    # Plain `tools/call` requests are answered in front of the SDK (mcp/fast.py): the `mcp_fast_path` speedup.
    fast = McpFastPath(
        StreamableHTTPASGIApp(manager),
        server,
        door.call_tool,
        security,
        enabled=speedups.on("mcp_fast_path"),
    )
    gate = McpSessionGate(fast, sessions, streams)
    # The endpoint of each /mcp row of the route table, with that row's auth mode (routes.for_settings:
    # `required` with mcp_auth_required).
    parts.mcp = lambda mode: McpKeyGate(gate, parts.access, settings.max_body_bytes, mode, settings.request_timeout)


class McpKeyGate:
    """What /mcp checks before the MCP machinery runs.

    - A key that is present but does not resolve: 401; no key at all too, with `mcp_auth_required`.
    - Two `Mcp-Session-Id` headers: 400 (McpSessionGate, behind this gate, binds each session to
      the identity that opened it).
    - A POST body is read here, by the reader of every door (request.read_body: at most `max_body_bytes`, within
      `request_timeout` seconds), and a JSON one must be JSON without duplicate keys or NaN/Infinity, the rule
      `POST /tools/{key}` applies: else a JSON-RPC error (413, 408; 400 with a parse error).

    The head, the caller and the body read here are handed to the gates behind as arguments (`serve`).
    """

    def __init__(
        self,
        app: McpSessionGate,
        access: Access,
        max_body: int = 1024 * 1024,
        mode: Mode = "keyed",
        body_timeout: float = 30.0,
    ) -> None:
        self.app = app
        self.access = access
        self.max_body = max_body
        self.mode = mode  # `required` with mcp_auth_required: no anonymous MCP callers
        self.body_timeout = body_timeout

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # (The imports are module-level: an import statement in a per-request path costs a lookup each time.)
        try:
            identity = await identity_from_scope(self.access, scope, self.mode)
        except ToolrunError as exc:
            await json_error(exc)(scope, receive, send)
            return
        # The SDK's road: McpDoor finds the caller in the scope of the Request the SDK hands it.
        scope.setdefault("state", {})["toolrun_identity"] = identity
        strip_routing_headers(scope)
        given = head(scope)
        if given.times(b"mcp-session-id") > 1:
            await _rpc_error(send, 400, -32600, "Bad Request: more than one Mcp-Session-Id header")
            return
        posted: Posted | None = None
        if scope["method"] == "POST":
            posted = await self._posted(given, receive, send)
            if posted is None:
                return
        await self.app.serve(scope, receive, send, given, identity, posted)

    async def _posted(self, given: Head, receive: Any, send: Any) -> Posted | None:
        """The POST body and, for a JSON content type, its value; None when an answer was sent instead (or the
        client is gone). Any other content type is the SDK's to refuse: its body is read (capped) but not parsed."""
        try:
            body = await read_body(receive, given.get(b"content-length"), self.max_body, self.body_timeout)
        except ToolrunError as exc:  # too large, too slow, a Content-Length that is no number
            if isinstance(exc, PayloadTooLarge):
                message = f"Payload Too Large: the body is over {self.max_body} bytes"
            else:
                message = f"{HTTPStatus(exc.http_status).phrase}: {exc}"
            await _rpc_error(send, exc.http_status, -32600, message)
            return None
        if body is None:
            return None  # the client is gone
        content_type = given.text(b"content-type")
        if content_type is None or not is_json_media(content_type):
            return body, UNPARSED
        try:
            return body, parse_json_value(body)
        except ToolrunError as exc:
            await _rpc_error(send, 400, -32700, f"Parse error: {exc}")
            return None


_ROUTING_HEADERS = frozenset({b"mcp-protocol-version", b"mcp-method", b"mcp-name"})
_OWS = b" \t"


def strip_routing_headers(scope: Any) -> None:
    """RFC 9110 (5.5): a field value excludes the whitespace around it. The MCP routing headers are compared
    with the body as they are (by the SDK and the fast path), so `Mcp-Name:  execute ` is stripped here first
    instead of being refused as a mismatch. The header list is replaced only when a value needs it."""
    headers = scope["headers"]
    if not any(name in _ROUTING_HEADERS and value != value.strip(_OWS) for name, value in headers):
        return
    scope["headers"] = [(name, value.strip(_OWS) if name in _ROUTING_HEADERS else value) for name, value in headers]


async def _rpc_error(send: Any, status: int, code: int, message: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
