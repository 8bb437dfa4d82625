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
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..state import McpSessionStore
from .request import replay

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


def _is_initialize(body: bytes) -> bool:
    if b"initialize" not in body:
        return False
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "initialize"


class McpSessionGate:
    """In front of the SDK's stateless `/mcp` app (and behind the key gate, which set the identity)."""

    def __init__(self, app: ASGIApp, sessions: McpSessionStore, max_body: int, streams: Any = None) -> None:
        self.app = app
        self.sessions = sessions
        self.max_body = max_body
        self.streams = streams  # mcp_stream.StreamHub: GET streams (None: every GET gets 405)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sid: str | None = None
        version: bytes | None = None
        for name, value in scope["headers"]:
            if name == b"mcp-session-id" and sid is None:
                sid = value.decode("latin-1")
            elif name == b"mcp-protocol-version" and version is None:
                version = value
        method = scope["method"]
        if version is not None and version not in _HANDSHAKE:  # a sessionless (2026-07-28) request
            await self.app(scope, receive, send)
            return
        if method == "GET" and self.streams is None:
            allow = [(b"allow", b"POST, DELETE")]
            await _jsonrpc_error(405, "Method Not Allowed: no server-to-client stream", allow)(scope, receive, send)
            return
        identity = scope.get("state", {}).get("toolrun_identity")
        owner = identity.bucket if identity is not None else "anon:-"
        if sid is not None:
            if await self.sessions.owner(sid) != owner:
                await _jsonrpc_error(404, "Session not found")(scope, receive, send)
                return
            if method == "GET":
                await self.streams.serve(sid, owner, scope, receive, send)
                return
            if method == "DELETE":
                await self.sessions.close(sid)
                if self.streams is not None:
                    self.streams.close_session(sid)
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
                await send({"type": "http.response.body", "body": b""})
                return
            await self.app(scope, receive, send)
            return
        if method != "POST":
            await _jsonrpc_error(400, "Bad Request: Missing session ID")(scope, receive, send)
            return
        # A handshake-era POST without a session: an `initialize` opens one.
        body, more, messages = bytearray(), True, []
        while more and len(body) <= self.max_body:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            more = bool(message.get("more_body", False))
        if more or not _is_initialize(bytes(body)):
            await self.app(scope, replay(receive, *messages), send)
            return
        new_sid = secrets.token_hex(16)

        async def send_with_session(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                # Recorded before the client can see the id: its next request may reach another worker.
                await self.sessions.open(new_sid, owner)
                message = {**message, "headers": [*message.get("headers", []), (b"mcp-session-id", new_sid.encode())]}
            await send(message)

        await self.app(scope, replay(receive, *messages), send_with_session)
