"""The HTTP protocol `toolrun serve` runs: uvicorn's httptools protocol with deadlines and a size cap.

The subclass overrides private uvicorn methods and reads private attributes, so pyproject.toml
bounds uvicorn to the minor version it was written against, and `uvicorn_misfit` names what does
not fit on any other: `toolrun serve` then refuses to start (the guards are a safety feature, not
an optimisation), and tests/test_dependency_patches.py fails with this patch's name.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from ..errors import RequestTimeout
from .disconnect import HOOK, client_gone

PATCH = "toolrun.server.protocol.GuardedHttpToolsProtocol (overrides uvicorn's HttpToolsProtocol internals)"
# The methods the subclass overrides or calls, with the parameters it passes.
_METHODS = {
    "connection_made": ["self", "transport"],
    "connection_lost": ["self", "exc"],
    "data_received": ["self", "data"],
    "on_message_begin": ["self"],
    "on_headers_complete": ["self"],
    "on_message_complete": ["self"],
    "on_response_complete": ["self"],
    "eof_received": ["self"],
    "_unset_keepalive_if_required": ["self"],
    "timeout_keep_alive_handler": ["self"],
    "_start_asgi_task": ["self", "cycle", "app"],
    "_unsupported_upgrade_warning": ["self"],
}
# The attributes it reads, and where uvicorn sets them.
_ATTRIBUTES = {
    "HttpToolsProtocol.__init__": (
        "self.loop",
        "self.cycle",
        "self.server_state",
        "self.pipeline",
        "self.timeout_keep_alive",
    ),
    "HttpToolsProtocol.connection_made": ("self.transport", "self.flow"),
    "HttpToolsProtocol.on_message_begin": ("self.scope",),
    "RequestResponseCycle.__init__": (
        "self.scope",
        "self.response_started",
        "self.response_complete",
        "self.disconnected",
        "self.message_event",
    ),
}


def uvicorn_misfit() -> str | None:
    """What the installed uvicorn lacks that the protocol subclass relies on (naming it), or None."""
    try:
        import uvicorn
        from uvicorn.protocols.http import httptools_impl
    except ImportError as exc:
        return f"{PATCH} does not fit this uvicorn: {exc}"
    problems = []
    classes = {name: getattr(httptools_impl, name, None) for name in ("HttpToolsProtocol", "RequestResponseCycle")}
    protocol = classes["HttpToolsProtocol"]
    for name, params in _METHODS.items():
        method = getattr(protocol, name, None)
        if method is None or list(inspect.signature(method).parameters) != params:
            problems.append(f"HttpToolsProtocol.{name}({', '.join(params)}) is gone or changed")
    for where, names in _ATTRIBUTES.items():
        cls_name, method_name = where.split(".")
        method = getattr(classes[cls_name], method_name, None)
        try:
            source = inspect.getsource(method) if method is not None else ""
        except (OSError, TypeError):
            continue  # no source to read (a compiled uvicorn): the method checks above still apply
        problems.extend(
            f"{where} no longer sets {name}"
            for name in names
            if not re.search(re.escape(name) + r"\s*(:[^=\n]*)?=", source)
        )
    if problems:
        return f"{PATCH} does not fit uvicorn {uvicorn.__version__}: " + "; ".join(problems)
    return None


class _Coalescing:
    """The connection's transport, with the writes of one loop iteration sent together.

    uvicorn writes a response's head and its body separately: two `send` calls and two TCP segments
    for every small answer. Here the first write of an iteration is held and a flush is scheduled
    for the end of it (`call_soon`); what else is written meanwhile joins it. A stream (an SSE
    event, a 100 Continue) still goes out in the iteration it was written in; `close` flushes first,
    `abort` drops what is held as it drops the transport's own buffer, and the protocol flushes when the client
    half-closes (asyncio then closes the transport itself). About 20 us of CPU less per
    small answer."""

    __slots__ = ("held", "loop", "transport")

    def __init__(self, transport: Any, loop: Any) -> None:
        self.transport = transport
        self.loop = loop
        self.held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self.held
        if held is None:
            self.held = bytes(data)
            self.loop.call_soon(self.flush)
        else:
            self.held = held + data

    def writelines(self, chunks: Any) -> None:
        self.write(b"".join(chunks))

    def flush(self) -> None:
        held = self.held
        if held is not None:
            self.held = None
            self.transport.write(held)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self.held = None
        self.transport.abort()

    def is_closing(self) -> bool:
        return bool(self.transport.is_closing())

    def get_write_buffer_size(self) -> int:
        return int(self.transport.get_write_buffer_size()) + len(self.held or b"")

    def __getattr__(self, name: str) -> Any:  # get_extra_info, pause_reading, resume_reading, ...
        return getattr(self.transport, name)


COALESCE = True  # bench/coalesce.py turns it off to measure what it saves
MAX_HEAD = 64 * 1024  # bytes of one request head (request line and headers); nginx's default is 32 KiB


def http_protocol(head_timeout: float) -> Any:
    """uvicorn's httptools protocol plus what it lacks: a deadline and a size cap for request heads.

    Without them a client that sends half a head holds its connection (and its buffers) forever,
    and one header can be megabytes long. A head not complete within `head_timeout` seconds
    (the `request_timeout` setting) gets a 408, one longer than MAX_HEAD bytes a 431, and the
    connection is closed. The body has the same deadline, on every route (/mcp included): a body
    (Content-Length or chunked) not complete `head_timeout` seconds after its head gets a 408 when
    no answer has started yet, and the connection is closed either way.
    """
    try:
        import httptools  # noqa: F401
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - uvicorn's h11 protocol caps heads at 16 KiB by itself
        return "h11"
    misfit = uvicorn_misfit()
    if misfit is not None:
        raise RuntimeError(misfit + " (install the uvicorn version pyproject.toml allows)")

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        _in_head = True  # between requests (or before the first one) and until the headers are complete
        _head_bytes = 0
        _head_begun = False
        _events = 0  # heads and messages completed: a chunk that completes one is not counted
        _in_body = False  # the head is complete, the body is not
        _body_timer: Any = None
        # Two deadlines, one timer. A head (or the first one, from the connection's start) must be complete by
        # `_head_at`; an idle keep-alive connection is closed at `_idle_at` (uvicorn's keep-alive timeout). Each
        # request sets and clears them, which costs an attribute store; the connection's one timer (`_tick`)
        # wakes at the earliest deadline it was armed for, acts on the deadlines that have passed and re-arms
        # for the rest. uvicorn's own way is a timer created and cancelled per request for each of them.
        _head_at: float | None = None
        _idle_at: float | None = None
        _timer: Any = None
        _timer_at = 0.0

        def connection_made(self, transport: Any) -> None:
            if COALESCE:  # head and body: one send
                transport = _Coalescing(transport, self.loop)
            super().connection_made(transport)
            self._head_at = self.loop.time() + head_timeout
            self._arm(self._head_at)

        def connection_lost(self, exc: Exception | None) -> None:
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                client_gone(cycle.scope)  # a call still running for this client is cancelled (disconnect.py)
            self._head_at = self._idle_at = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._stop_body_timer()
            super().connection_lost(exc)

        def eof_received(self) -> None:
            # The client half-closed: asyncio closes the transport itself once this returns (not through the
            # wrapper), so an answer written in this iteration must leave now.
            transport: Any = self.transport  # uvicorn types it as asyncio's Transport; it may be the wrapper
            if isinstance(transport, _Coalescing):
                transport.flush()
            super().eof_received()

        def _arm(self, at: float) -> None:
            timer = self._timer
            if timer is not None:
                if self._timer_at <= at:
                    return  # it wakes first, and re-arms for this deadline then
                timer.cancel()
            self._timer_at = at
            self._timer = self.loop.call_at(at, self._tick)

        def _tick(self) -> None:
            self._timer = None
            if self.transport.is_closing():
                return
            now = self.loop.time() + 0.001  # a timer may run a clock tick early
            if self._head_at is not None and now >= self._head_at:
                self._head_at = None
                self._head_timed_out()
            elif self._idle_at is not None and now >= self._idle_at:
                self._idle_at = None
                self.timeout_keep_alive_handler()
            else:
                pending = [at for at in (self._head_at, self._idle_at) if at is not None]
                if pending:
                    self._arm(min(pending))

        def _unset_keepalive_if_required(self) -> None:
            self._idle_at = None  # uvicorn cancels its timer here: data arrived, the connection is not idle

        def on_response_complete(self) -> None:
            # uvicorn's, with the keep-alive deadline set instead of a timer created.
            self.server_state.total_requests += 1
            if self.transport.is_closing():
                return
            self._idle_at = None
            self.flow.resume_reading()
            if self.pipeline:
                cycle, app = self.pipeline.pop()
                self._start_asgi_task(cycle, app)
            else:
                self._idle_at = self.loop.time() + self.timeout_keep_alive
                self._arm(self._idle_at)

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                room = MAX_HEAD - self._head_bytes
                if len(data) > room and b"\r\n\r\n" not in data[: max(room, 0) + 4]:
                    self._refuse(431, "Request Header Fields Too Large", f"request head over {MAX_HEAD} bytes")
                    return
            events = self._events
            super().data_received(data)
            if self._in_head and self._events == events and not self.transport.is_closing():
                self._head_bytes += len(data)
            elif self._in_body and self._body_timer is None and not self.transport.is_closing():
                # Armed only when a body is still on its way after this chunk (rare: a small body comes
                # in the packet of its head), so the common request costs no timer.
                self._body_timer = self.loop.call_later(head_timeout, self._body_timed_out)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._head_begun = True
            if self._head_at is None:
                self._head_at = self.loop.time() + head_timeout
                self._arm(self._head_at)

        def on_headers_complete(self) -> None:
            self.scope[HOOK] = None  # type: ignore[literal-required]  # this server cancels a call whose client goes away (disconnect.py)
            self._in_head, self._head_bytes, self._head_begun = False, 0, False
            self._in_body = True
            self._events += 1
            self._head_at = None
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._in_head, self._head_bytes = True, 0
            self._in_body = False
            self._stop_body_timer()
            self._events += 1
            super().on_message_complete()

        def _stop_body_timer(self) -> None:
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def _body_timed_out(self) -> None:
            self._body_timer = None
            if not self._in_body or self.transport.is_closing():
                return
            cycle = getattr(self, "cycle", None)
            if cycle is not None:
                started = cycle.response_started
                # The app's receive() now sees a disconnect, and whatever it still sends is dropped.
                cycle.disconnected = True
                cycle.message_event.set()
                if started:
                    self.transport.close()
                    return
            self._refuse(408, "Request Timeout", RequestTimeout(head_timeout).summary)

        def _head_timed_out(self) -> None:
            if self._in_head and not self.transport.is_closing():
                if self._head_begun:
                    self._refuse(408, "Request Timeout", f"request head not received within {head_timeout:g} seconds")
                else:
                    self.transport.close()

        def _unsupported_upgrade_warning(self) -> None:
            # No WebSocket routes here (and ws="none"): refuse an upgrade with a clean 400, whether or not a
            # WebSocket library happens to be installed, instead of leaving the request unanswered.
            self._refuse(400, "Bad Request", "upgrade requests (WebSocket) are not supported")

        def _refuse(self, status: int, reason: str, message: str) -> None:
            self._head_at = None
            body = message.encode()
            self.transport.write(
                f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                + body
            )
            self.transport.close()

    return GuardedHttpToolsProtocol
