"""The HTTP protocol `toolrun serve` runs: uvicorn's httptools protocol with deadlines and a size cap.

Two layers, each a class here:

- `SafeHttpToolsProtocol`, the safety features uvicorn lacks: a deadline and a size cap for
  request heads, a deadline for bodies, a clean refusal of upgrade requests, and the call of a
  request's disconnect hook when its connection is lost (disconnect.py). Everything else is
  uvicorn's own, keep-alive included.
- two speedups on top (speedups.py), each a subclass of the safe layer: `CoalescingHttpToolsProtocol`
  (`coalesce`: the writes of one loop iteration leave in one send, `CoalescingTransport`) and
  `IdleTimerHttpToolsProtocol` (`keepalive_timer`: one lazily re-armed keep-alive timer per
  connection instead of uvicorn's, created and cancelled for every request). `http_protocol`
  combines the ones `TOOLRUN_SPEEDUPS` leaves on; with both off it serves the safe layer alone.
- a third, `direct_answer`: the plain handlers (POST /tools/{key}, GET /healthz, GET /tools/{key}) hand
  their whole answer, head and body, to `answer`, which writes the bytes uvicorn's `send` would
  write, in one transport write at once, and completes the request as uvicorn's `send` does.

The classes override private uvicorn methods and read private attributes, so pyproject.toml bounds
uvicorn to the minor version they were written against, and `uvicorn_misfit` names what does not
fit on any other: `toolrun serve` then refuses to start (the guards are a safety feature, not an
optimisation), and tests/test_dependency_patches.py fails with this patch's name.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import httptools  # noqa: F401  # a dependency (pyproject.toml): uvicorn's httptools protocol needs it
from uvicorn.protocols.http.httptools_impl import HEADER_VALUE_RE, STATUS_LINE, HttpToolsProtocol

from .. import speedups
from ..errors import RequestTimeout
from ..words import seconds
from .disconnect import HOOK, client_gone

PATCH = "toolrun.server.protocol.GuardedHttpToolsProtocol (overrides uvicorn's HttpToolsProtocol internals)"
# The methods the classes override or call, with the parameters they pass.
_METHODS = {
    "connection_made": ["self", "transport"],
    "connection_lost": ["self", "exc"],
    "data_received": ["self", "data"],
    "on_message_begin": ["self"],
    "on_headers_complete": ["self"],
    "on_message_complete": ["self"],
    "eof_received": ["self"],
    "_unsupported_upgrade_warning": ["self"],
    # keepalive_timer: uvicorn's on_response_complete, with a deadline set instead of a timer created
    "on_response_complete": ["self"],
    "_unset_keepalive_if_required": ["self"],
    "timeout_keep_alive_handler": ["self"],
    "_start_asgi_task": ["self", "cycle", "app"],
}
# The attributes they read, and where uvicorn sets them.
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
        # direct_answer (`answer`) also reads and sets these
        "self.transport",
        "self.flow",
        "self.access_log",
        "self.default_headers",
        "self.keep_alive",
        "self.waiting_for_100_continue",
        "self.on_response",
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


class CoalescingTransport:
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

    def write_now(self, data: bytes) -> None:
        """`data` leaves now, after what is held (a whole answer: nothing else joins it this iteration)."""
        held = self.held
        self.held = None
        self.transport.write(data if held is None else held + data)

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


MAX_HEAD = 64 * 1024  # bytes of one request head (request line and headers); nginx's default is 32 KiB
# Bytes a client may send behind a pipelined request that waits for the call before it: read (so a lost
# connection is seen) and parsed when that request starts. More closes the connection.
MAX_HELD = 1024 * 1024
COALESCE = speedups.on("coalesce")  # bench/coalesce.py turns it off to measure what it saves
KEEPALIVE_TIMER = speedups.on("keepalive_timer")
DIRECT_ANSWER = speedups.on("direct_answer")
ANSWER = "toolrun.answer"  # scope key: the request's uvicorn cycle, for `answer` (absent: answer through `send`)


def answer(scope: Any, send: Any, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> bool:
    """Write a whole answer (lowercase header names, `content-length` among them) as uvicorn's `send` would, in one
    transport write, and complete the request; False when it must go through `send` instead: a server that is not
    this one, a `send` wrapped by a layer (CORS), uvicorn's own access log, a paused writer, a status uvicorn
    has no line for, a HEAD request, a header value it would refuse, a `connection` header, or an answer
    already begun.

    The `direct_answer` speedup: uvicorn's `send` checks each header with two regular expressions, lowercases
    it, builds the head from a list, and writes the head and the body apart (joined later by the coalescing
    transport, from a callback): about 15-25 us of CPU per answer (speedups.py)."""
    cycle: Any = scope.get(ANSWER)
    unwrapped = cycle is not None and getattr(send, "__self__", None) is cycle  # uvicorn's own send, no layer
    if (
        not unwrapped
        or cycle.response_started
        or cycle.disconnected
        or cycle.access_log
        or cycle.flow.write_paused
        or status not in STATUS_LINE
        or scope["method"] == "HEAD"
    ):
        return False
    parts = [STATUS_LINE[status]]
    for name, value in (*cycle.default_headers, *headers):
        if HEADER_VALUE_RE.search(value) or name == b"connection":
            return False  # uvicorn's send raises on the first, and reads the second: its road
        parts += (name, b": ", value, b"\r\n")
    if not cycle.keep_alive:
        parts.append(b"connection: close\r\n")
    parts += (b"\r\n", body)
    cycle.response_started = True
    cycle.waiting_for_100_continue = False
    transport = cycle.transport
    data = b"".join(parts)
    if isinstance(transport, CoalescingTransport):
        transport.write_now(data)
    else:
        transport.write(data)
    cycle.response_complete = True
    cycle.message_event.set()
    if not cycle.keep_alive:
        transport.close()
    cycle.on_response()
    return True


class SafeHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol plus what it lacks: deadlines for request heads and bodies, a head size cap.

    Without them a client that sends half a head holds its connection (and its buffers) forever,
    and one header can be megabytes long. A head not complete within `head_timeout` seconds
    (the `request_timeout` setting; the first head counts from the connection's start, later ones
    from their first byte) gets a 408, one longer than MAX_HEAD bytes a 431, and the connection is
    closed; a connection that never starts a head is closed quietly. The body has the same deadline,
    on every route (/mcp included): a body (Content-Length or chunked) not complete `head_timeout`
    seconds after its head gets a 408 when no answer has started yet, and the connection is closed
    either way. An upgrade request (WebSocket) gets a 400. uvicorn stops reading a connection while a pipelined
    request waits for the one before it; here it reads on (up to MAX_HELD bytes, kept and parsed once the waiting
    requests started), so the close of a client that hangs up is seen and cancels the call that runs.

    A deadline's timer is armed only while a head or a body is still on its way at the end of a
    chunk: a request that arrives in one packet, the common case, costs none (the first head's,
    armed when the connection is made, is cancelled when that head is complete). Keep-alive is
    uvicorn's.
    """

    head_timeout = 30.0  # `http_protocol` binds the setting
    _in_head = True  # between requests (or before the first one) and until the headers are complete
    _head_bytes = 0
    _events = 0  # heads and messages completed: a chunk that completes one is not counted
    _in_body = False  # the head is complete, the body is not
    _head_due: float | None = None  # when the head on its way must be complete; None while no head is begun
    _head_begun = False
    _head_timer: Any = None
    _body_timer: Any = None
    _running: Any = None  # the cycle whose ASGI task was started last: a pipelined one is `self.cycle`, not it
    _held: bytearray | None = None  # bytes read while a pipelined request waits, parsed once it starts

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._head_due = self.loop.time() + self.head_timeout  # the first head counts from the connection's start
        self._head_timer = self.loop.call_at(self._head_due, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        for cycle in {self.cycle, self._running}:  # the request parsed last may be a pipelined one that waits
            if cycle is not None and not cycle.response_complete:
                client_gone(cycle.scope)  # a call still running for this client is cancelled (disconnect.py)
        self._head_due = None
        self._stop_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._held is not None:  # a pipelined request waits: keep reading, so that a lost connection is seen
            self._held += data
            if len(self._held) > MAX_HELD:
                self.transport.close()  # the running call is cancelled as for a client that hung up
            return
        if self._in_head:
            room = MAX_HEAD - self._head_bytes
            if len(data) > room and b"\r\n\r\n" not in data[: max(room, 0) + 4]:
                self._refuse(431, "Request Header Fields Too Large", f"request head over {MAX_HEAD} bytes")
                return
        events = self._events
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self._in_head and self._events == events:
            self._head_bytes += len(data)
        if self._head_due is not None and self._head_timer is None:
            # A head still on its way after this chunk: its deadline gets a timer now.
            self._head_timer = self.loop.call_at(self._head_due, self._head_timed_out)
        elif self._in_body and self._body_timer is None:
            # A body still on its way after this chunk (rare: a small body comes in the packet of its head).
            self._body_timer = self.loop.call_later(self.head_timeout, self._body_timed_out)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_begun = True
        if self._head_due is None:
            self._head_due = self.loop.time() + self.head_timeout

    def on_headers_complete(self) -> None:
        self.scope[HOOK] = None  # type: ignore[literal-required]  # this server cancels a call whose client goes away (disconnect.py)
        self._in_head, self._head_bytes, self._head_begun, self._head_due = False, 0, False, None
        self._in_body = True
        self._events += 1
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().on_headers_complete()
        cycle = self.cycle
        if DIRECT_ANSWER and cycle is not None and cycle.scope is self.scope:
            self.scope[ANSWER] = cycle  # type: ignore[literal-required]  # the plain handlers' `answer`
        if self.pipeline:
            # uvicorn stops reading while a pipelined request waits (at each one): the close of a client that hangs
            # up would go unseen, and its call run to its end. Read on, and keep what comes until they started.
            if self._held is None:
                self._held = bytearray()
            self.flow.resume_reading()

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        self._running = cycle
        super()._start_asgi_task(cycle, app)
        if self._held is not None and not self.pipeline:  # the last waiting request started: parse what came
            self.loop.call_soon(self._release_held)

    def _release_held(self) -> None:
        held, self._held = self._held, None
        if held and not self.transport.is_closing():
            self.data_received(bytes(held))

    def on_message_complete(self) -> None:
        self._in_head, self._head_bytes = True, 0
        self._in_body = False
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        self._events += 1
        super().on_message_complete()

    def _stop_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if not self._in_body or self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None:
            started = cycle.response_started
            # The app's receive() now sees a disconnect, and whatever it still sends is dropped.
            cycle.disconnected = True
            cycle.message_event.set()
            if started:
                self.transport.close()
                return
        self._refuse(408, "Request Timeout", RequestTimeout(self.head_timeout).summary)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self._head_begun:
            self._refuse(408, "Request Timeout", f"request head not received within {seconds(self.head_timeout)}")
        else:
            self.transport.close()  # the connection never started a request

    def _unsupported_upgrade_warning(self) -> None:
        # No WebSocket routes here (and ws="none"): refuse an upgrade with a clean 400, whether or not a
        # WebSocket library happens to be installed, instead of leaving the request unanswered.
        self._refuse(400, "Bad Request", "upgrade requests (WebSocket) are not supported")

    def _refuse(self, status: int, reason: str, message: str) -> None:
        self._head_due = None
        self._stop_timers()
        body = message.encode()
        self.transport.write(
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        self.transport.close()


class CoalescingHttpToolsProtocol(SafeHttpToolsProtocol):
    """The safe protocol with the `coalesce` speedup: a response's head and body leave in one send."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(CoalescingTransport(transport, self.loop))

    def eof_received(self) -> None:
        # The client half-closed: asyncio closes the transport itself once this returns (not through the
        # wrapper), so an answer written in this iteration must leave now.
        transport: Any = self.transport  # uvicorn types it as asyncio's Transport: here it is the wrapper
        transport.flush()
        super().eof_received()


class IdleTimerHttpToolsProtocol(SafeHttpToolsProtocol):
    """The safe protocol with the `keepalive_timer` speedup: one keep-alive timer per connection, re-armed lazily.

    uvicorn creates a timer when an answer is complete and cancels it when the next request's first bytes arrive:
    a timer made and dropped per request on a kept-alive connection. Here an answer sets a deadline (`_idle_at`)
    and data clears it, an attribute store each; the connection's one timer wakes at the deadline it was armed
    for, closes the connection if it has been idle since, and else re-arms for the deadline now set (or for none:
    the next answer arms it again). The same close, at the same time, as uvicorn's."""

    _idle_at: float | None = None
    _idle_timer: Any = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        super().connection_lost(exc)

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
            if self._idle_timer is None:
                self._idle_timer = self.loop.call_at(self._idle_at, self._idle_tick)

    def _idle_tick(self) -> None:
        self._idle_timer = None
        idle_at = self._idle_at
        if idle_at is None or self.transport.is_closing():
            return
        if self.loop.time() + 0.001 >= idle_at:  # a timer may run a clock tick early
            self._idle_at = None
            self.timeout_keep_alive_handler()
        else:
            self._idle_timer = self.loop.call_at(idle_at, self._idle_tick)


def http_protocol(head_timeout: float) -> type[SafeHttpToolsProtocol]:
    """The protocol class for `uvicorn.Config(http=...)`: the safe layer, with the speedups that are on, and
    `head_timeout` (the `request_timeout` setting) bound. RuntimeError when uvicorn does not fit."""
    misfit = uvicorn_misfit()
    if misfit is not None:
        raise RuntimeError(misfit + " (install the uvicorn version pyproject.toml allows)")
    layers = (CoalescingHttpToolsProtocol, COALESCE), (IdleTimerHttpToolsProtocol, KEEPALIVE_TIMER)
    bases = tuple(cls for cls, on in layers if on) or (SafeHttpToolsProtocol,)
    return type("GuardedHttpToolsProtocol", bases, {"head_timeout": head_timeout, "__module__": __name__})
