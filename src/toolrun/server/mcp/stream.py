"""Server-to-client MCP streams over HTTP: how a catalog reload reaches HTTP clients.

`/mcp` is served statelessly (any worker or replica answers any request), but a client that holds
a stream open is connected to one process, and every process reloads the catalog on its own (its
poll, SIGHUP): so each process announces its own swaps on the streams it holds.

- **Handshake era** (`Mcp-Session-Id`): `GET /mcp` is the protocol's optional server-to-client event
  stream, for a session the caller owns (McpSessionGate has checked the key and the owner: 404 for
  an unknown, closed or another caller's session). The stream sends `notifications/tools/list_changed`
  after each swap of this process's catalog, and a keep-alive comment every `mcp_stream_keepalive`
  seconds; at each keep-alive the session is looked up again, so a session closed (DELETE) or expired
  on another worker or replica ends its streams within one interval (a DELETE received here ends them
  at once). One stream per session and process: a new GET replaces the previous one. At most
  `mcp_max_streams` streams per process, and at most `mcp_max_streams_per_caller` of them for one caller
  (its session owner: a user, or an anonymous client address), so one caller cannot take the streams
  of others (503 with Retry-After beyond either). A client that stops reading for
  `request_timeout` seconds loses its stream. No event ids, no replay: a client that reconnects lists
  the tools again.
- **2026-07-28** (no session): the SDK's `subscriptions/listen`, a POST whose answer is the stream;
  the same swaps are published to it (`ToolsListChanged`). They count towards the same per-caller
  share over HTTP (a JSON-RPC error beyond it), and have a cap of `mcp_max_streams` of their own.

At shutdown (SIGTERM) every stream ends at once (`end_streams`, called before uvicorn drains), so the
drain never waits for a client that is only listening.
"""

from __future__ import annotations

import contextlib
import json
import logging
import weakref
from typing import Any

import anyio
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR
from starlette.types import Receive, Scope, Send

from ..request import head

log = logging.getLogger("toolrun.mcp")

LIST_CHANGED = (
    b"event: message\r\ndata: "
    + json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}).encode()
    + b"\r\n\r\n"
)
KEEPALIVE = b": keep-alive\r\n\r\n"
OPENED = b"retry: 1000\r\n\r\n"  # after a closed stream (a restart), the client reconnects in 1 s

_HUBS: weakref.WeakSet[StreamHub] = weakref.WeakSet()


def end_streams() -> None:
    """End every stream of this process and refuse new ones: the server is shutting down."""
    for hub in list(_HUBS):
        hub.shutdown()


class _Stream:
    """One open GET stream: what it must send next (coalesced: one pending list_changed is enough)."""

    def __init__(self) -> None:
        self.changed = False
        self.ended = False
        self._wake = anyio.Event()

    def push(self) -> None:
        self.changed = True
        self._wake.set()

    def end(self) -> None:
        self.ended = True
        self._wake.set()

    async def next(self, timeout: float) -> bytes | None:
        """The next bytes to send (a change, or a keep-alive after `timeout`), None when it must end."""
        with anyio.move_on_after(timeout):
            await self._wake.wait()
        if self.ended:
            return None
        if self.changed:
            self.changed = False
            self._wake = anyio.Event()
            return LIST_CHANGED
        return KEEPALIVE


class _Listen(ListenHandler):
    """The SDK's `subscriptions/listen` handler, refusing new streams once the server is shutting down."""

    def __init__(self, hub: StreamHub, max_streams: int) -> None:
        super().__init__(hub.bus, max_subscriptions=max_streams, max_buffered_events=16)
        self.hub = hub

    async def __call__(self, ctx: Any, params: Any) -> Any:
        hub = self.hub
        if hub.closing:
            raise MCPError(INTERNAL_ERROR, "the server is shutting down; listen again")
        request = getattr(ctx, "request", None)
        identity = request.scope.get("state", {}).get("toolrun_identity") if request is not None else None
        if identity is None:  # stdio: the one client of this process
            return await super().__call__(ctx, params)
        owner = identity.bucket
        if not hub.admit(owner):
            raise MCPError(INTERNAL_ERROR, hub.caller_full)
        try:
            return await super().__call__(ctx, params)
        finally:
            hub.leave(owner)


class StreamHub:
    """This process's server-to-client streams: GET streams by session id, and the listen streams."""

    def __init__(
        self, sessions: Any, *, keepalive: float, write_timeout: float, max_streams: int, per_caller: int | None = None
    ) -> None:
        self.sessions = sessions  # the shared McpSessionStore: a stream ends when its session is gone
        self.keepalive = keepalive
        self.write_timeout = write_timeout
        self.max_streams = max_streams
        # One caller (an anonymous client address included) never holds more than half of the streams, whatever
        # the settings say: a share as large as the total would let one caller take every stream.
        half = max(1, max_streams // 2)
        self.per_caller = min(per_caller, half) if per_caller is not None else half
        self.caller_full = f"too many open MCP streams for this caller (at most {self.per_caller} per caller)"
        self.held: dict[str, int] = {}  # caller (session owner) -> its open streams, GET and listen
        self.streams: dict[str, _Stream] = {}
        self.closing = False
        self.bus = InMemorySubscriptionBus()
        self.listen = _Listen(self, max_streams)
        _HUBS.add(self)

    async def catalog_changed(self) -> None:
        """A reload listener: tell every stream of this process that the tool list changed."""
        for stream in list(self.streams.values()):
            stream.push()
        await self.bus.publish(ToolsListChanged())

    def admit(self, owner: str) -> bool:
        """Count one more stream of `owner`, unless it holds its share already."""
        held = self.held.get(owner, 0)
        if held >= self.per_caller:
            return False
        self.held[owner] = held + 1
        return True

    def leave(self, owner: str) -> None:
        held = self.held.get(owner, 0) - 1
        if held > 0:
            self.held[owner] = held
        else:
            self.held.pop(owner, None)

    def close_session(self, sid: str) -> None:
        stream = self.streams.get(sid)
        if stream is not None:
            stream.end()

    def shutdown(self) -> None:
        self.closing = True
        for stream in list(self.streams.values()):
            stream.end()
        self.listen.close()

    async def serve(self, sid: str, owner: str, scope: Scope, receive: Receive, send: Send) -> None:
        """GET /mcp for session `sid`, whose owner the gate has checked: the event stream."""
        refusal = self._refusal(sid, owner, scope)
        if refusal is not None:
            await _plain(send, *refusal)
            return
        previous = self.streams.get(sid)
        if previous is not None:
            previous.end()  # a client reconnecting: the newer stream wins (and takes its place in the share)
        else:
            self.admit(owner)  # within its share: _refusal said so, and nothing ran since
        stream = self.streams[sid] = _Stream()
        headers = [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache, no-transform"),
            (b"x-accel-buffering", b"no"),  # nginx: pass each event on at once
            (b"mcp-session-id", sid.encode()),
        ]
        stalled = False
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            async with anyio.create_task_group() as tg:
                tg.start_soon(_watch_disconnect, receive, tg.cancel_scope)
                chunk: bytes | None = OPENED
                while chunk is not None:
                    with anyio.move_on_after(self.write_timeout) as writing:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    if writing.cancelled_caught:
                        stalled = True
                        log.warning(
                            "MCP stream of session %s…: the client read nothing for %gs; closing it",
                            sid[:8],
                            self.write_timeout,
                        )
                        break
                    chunk = await stream.next(self.keepalive)
                    if chunk is KEEPALIVE and not await self._still_open(sid, owner):
                        chunk = None  # closed (DELETE) or expired elsewhere
                tg.cancel_scope.cancel()
            if not stalled:
                with contextlib.suppress(Exception):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if self.streams.get(sid) is stream:
                del self.streams[sid]
                self.leave(owner)

    async def _still_open(self, sid: str, owner: str) -> bool:
        try:
            return bool(await self.sessions.owner(sid) == owner)
        except Exception as exc:  # the shared store is down: keep the stream, look again at the next keep-alive
            log.warning("MCP stream: session lookup failed: %s: %s", type(exc).__name__, exc)
            return True

    def _refusal(self, sid: str, owner: str, scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        if self.closing:
            return 503, "the server is shutting down", [(b"retry-after", b"1")]
        accept = head(scope).joined(b"accept").lower()  # every Accept line counts (HTTP list headers)
        if b"text/event-stream" not in accept and b"*/*" not in accept:
            return 406, "Not Acceptable: the stream needs Accept: text/event-stream", []
        if sid in self.streams:
            return None  # a reconnection replaces the session's own stream
        if self.held.get(owner, 0) >= self.per_caller:
            return 503, self.caller_full, [(b"retry-after", b"5")]
        if len(self.streams) >= self.max_streams:
            return 503, f"too many open MCP streams (at most {self.max_streams})", [(b"retry-after", b"5")]
        return None


async def _watch_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _plain(send: Send, status: int, message: str, extra: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
