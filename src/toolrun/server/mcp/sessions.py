"""MCP sessions of handshake-era HTTP clients, valid on every worker and every replica.

The MCP SDK serves `/mcp` statelessly here: each request gets a fresh transport, so any worker (or
any replica behind a round-robin proxy) can answer any request. What a handshake-era client still
sees is a session: this gate gives its `initialize` answer an `Mcp-Session-Id`, records the id
with its owner (the caller's rate-limit bucket: a user, or an anonymous address) in the shared
store (memory for one process, the state file for several workers, Redis with `redis_url`), and
then, on every request that carries the id:

- an id that was never opened, was closed (DELETE) or has expired gets 404 `Session not found`
  (the client opens a new session), as does an id used by anyone but its owner;
- DELETE closes the session, on whichever worker or replica receives it;
- the id keys the session values of fn tools (`get_session` / `set_session`), which live in the
  same shared store, so they follow the client from worker to worker.

- a GET with the id is the optional server-to-client event stream (mcp_stream.StreamHub): it
  carries `notifications/tools/list_changed` when this process reloads its catalog. A GET without
  an id gets 400 (a stream belongs to a session); without a hub every GET gets 405, the protocol's
  "no stream here".

2026-07-28 clients have no session and pass through untouched.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from ...state import McpSessionStore
from ..request import UNPARSED, Head, Posted

if TYPE_CHECKING:
    from ...models import Identity
    from .fast import McpFastPath

_HANDSHAKE = frozenset(v.encode() for v in HANDSHAKE_PROTOCOL_VERSIONS)


def _jsonrpc_error(status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        extra = headers or []
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *extra,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


def _is_initialize(posted: Posted) -> bool:
    body, message = posted
    if message is UNPARSED:  # a content type that is not JSON: the SDK refuses it, unless it reads it as JSON
        if b"initialize" not in body:
            return False
        try:
            message = json.loads(body)
        except ValueError:
            return False
    return isinstance(message, dict) and message.get("method") == "initialize"


class McpSessionGate:
    """In front of the SDK's stateless `/mcp` app (behind the key gate, which hands it the head, the caller and
    the POST body it read)."""

    def __init__(self, app: McpFastPath, sessions: McpSessionStore, streams: Any = None) -> None:
        self.app = app
        self.sessions = sessions
        self.streams = streams  # mcp_stream.StreamHub: GET streams (None: every GET gets 405)

    async def serve(
        self, scope: Scope, receive: Receive, send: Send, given: Head, identity: Identity, posted: Posted | None
    ) -> None:
        """Answer or pass on one /mcp request; `posted` is the body of a POST (None for GET and DELETE)."""
        version = given.get(b"mcp-protocol-version")
        if version is not None and version not in _HANDSHAKE:  # a sessionless (2026-07-28) request
            await self.app.serve(scope, receive, send, given, posted)
            return
        method = scope["method"]
        if method == "GET" and self.streams is None:
            allow = [(b"allow", b"POST, DELETE")]
            await _jsonrpc_error(405, "Method Not Allowed: no server-to-client stream", allow)(scope, receive, send)
            return
        owner = identity.bucket
        sid = given.text(b"mcp-session-id")
        if sid is not None:
            await self._in_session(sid, owner, scope, receive, send, given, posted)
            return
        if posted is None:
            await _jsonrpc_error(400, "Bad Request: Missing session ID")(scope, receive, send)
            return
        # A handshake-era POST without a session: an `initialize` opens one.
        if not _is_initialize(posted):
            await self.app.serve(scope, receive, send, given, posted)
            return
        new_sid = secrets.token_hex(16)

        async def send_with_session(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                # Recorded before the client can see the id: its next request may reach another worker.
                await self.sessions.open(new_sid, owner)
                message = {**message, "headers": [*message.get("headers", []), (b"mcp-session-id", new_sid.encode())]}
            await send(message)

        await self.app.serve(scope, receive, send_with_session, given, posted)

    async def _in_session(
        self, sid: str, owner: str, scope: Scope, receive: Receive, send: Send, given: Head, posted: Posted | None
    ) -> None:
        """A request that names session `sid`: its owner's only (else 404); GET streams, DELETE closes it."""
        if await self.sessions.owner(sid) != owner:
            await _jsonrpc_error(404, "Session not found")(scope, receive, send)
            return
        method = scope["method"]
        if method == "GET":
            await self.streams.serve(sid, owner, scope, receive, send)
        elif method == "DELETE":
            await self.sessions.close(sid)
            if self.streams is not None:
                self.streams.close_session(sid)
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
        else:
            await self.app.serve(scope, receive, send, given, posted)
