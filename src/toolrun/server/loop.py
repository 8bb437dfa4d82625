"""The event loop `toolrun serve` runs on: asyncio's selector loop, with accept() failures contained.

When the process is out of file descriptors (EMFILE, ENFILE) or memory (ENOBUFS, ENOMEM),
asyncio's `_accept_connection` logs a traceback and schedules a retry for *each* of the
`backlog` (2048) iterations of its accept loop, every time the listening socket is readable:
thousands of tracebacks a second (85 MB of log in 15 s), thousands of timers, and a loop too busy
to answer `/healthz` even after the connections are gone.

Here a failed accept stops that round: one retry is scheduled (RETRY seconds later, so the server
takes connections again as soon as descriptors are free), and the failure is logged at most once a
second, with the number of failures since the last line.

`ServerLoop` overrides one private method of asyncio's selector loop and calls three more, so
pyproject.toml bounds `requires-python` to the versions whose asyncio they were checked against,
and `asyncio_misfit` names what does not fit: `toolrun serve` then refuses to start (as for the
uvicorn protocol, protocol.py), and tests/test_dependency_patches.py fails with this patch's name.
"""

from __future__ import annotations

import asyncio
import errno
import inspect
import logging
import sys
import time
from typing import Any

log = logging.getLogger("toolrun.server")

RETRY = 0.1  # seconds between accept attempts while out of resources
_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)

PATCH = "toolrun.server.loop.ServerLoop (overrides asyncio's BaseSelectorEventLoop._accept_connection)"
LOOP = "toolrun.server.loop:ServerLoop"  # uvicorn.Config(loop=...)
# The private methods of asyncio.selector_events.BaseSelectorEventLoop it overrides or calls, with their parameters:
# the override passes its trailing arguments (the two TLS timeouts) on to the other two in the same order.
_METHODS = {
    "_accept_connection": [
        "self",
        "protocol_factory",
        "sock",
        "sslcontext",
        "server",
        "backlog",
        "ssl_handshake_timeout",
        "ssl_shutdown_timeout",
    ],
    "_accept_connection2": [
        "self",
        "protocol_factory",
        "conn",
        "extra",
        "sslcontext",
        "server",
        "ssl_handshake_timeout",
        "ssl_shutdown_timeout",
    ],
    "_start_serving": [
        "self",
        "protocol_factory",
        "sock",
        "sslcontext",
        "server",
        "backlog",
        "ssl_handshake_timeout",
        "ssl_shutdown_timeout",
    ],
    "_remove_reader": ["self", "fd"],
}


def asyncio_misfit() -> str | None:
    """What this Python's asyncio lacks that `ServerLoop` relies on (naming it), or None."""
    base = asyncio.selector_events.BaseSelectorEventLoop
    problems = []
    for name, params in _METHODS.items():
        method = getattr(base, name, None)
        if method is None or list(inspect.signature(method).parameters) != params:
            problems.append(f"BaseSelectorEventLoop.{name}({', '.join(params)}) is gone or changed")
    if problems:
        return f"{PATCH} does not fit Python {sys.version.split()[0]}: " + "; ".join(problems)
    return None


def server_loop() -> str:
    """The loop for `uvicorn.Config(loop=...)`; RuntimeError naming the misfit when this Python's asyncio moved."""
    misfit = asyncio_misfit()
    if misfit is not None:
        raise RuntimeError(misfit + " (run toolrun on a Python version pyproject.toml allows)")
    return LOOP


class ServerLoop(asyncio.SelectorEventLoop):
    """`uvicorn.Config(loop="toolrun.server.loop:ServerLoop")`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._accept_failures = 0
        self._accept_logged = 0.0
        self._accept_retrying: set[int] = set()

    def _accept_connection(
        self,
        protocol_factory: Any,
        sock: Any,
        sslcontext: Any = None,
        server: Any = None,
        backlog: int = 100,
        *args: Any,
    ) -> None:
        for _ in range(backlog):
            try:
                conn, addr = sock.accept()
                conn.setblocking(False)
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in _RESOURCE_ERRORS:
                    raise
                self._accept_failed(exc, protocol_factory, sock, sslcontext, server, backlog, *args)
                return
            else:
                accept = self._accept_connection2(  # type: ignore[attr-defined]
                    protocol_factory, conn, {"peername": addr}, sslcontext, server, *args
                )
                self.create_task(accept)

    def _accept_failed(self, exc: OSError, protocol_factory: Any, sock: Any, *rest: Any) -> None:
        self._accept_failures += 1
        now = time.monotonic()
        if now - self._accept_logged >= 1.0:
            log.error(
                "cannot accept connections: %s (%d failed accept(s) since the last report); retrying every %gs",
                exc.strerror or exc,
                self._accept_failures,
                RETRY,
            )
            self._accept_logged, self._accept_failures = now, 0
        fd = sock.fileno()
        self._remove_reader(fd)  # type: ignore[attr-defined]
        if fd not in self._accept_retrying:  # one pending retry per listening socket, never thousands
            self._accept_retrying.add(fd)
            self.call_later(RETRY, self._accept_retry, fd, protocol_factory, sock, *rest)

    def _accept_retry(self, fd: int, protocol_factory: Any, sock: Any, *rest: Any) -> None:
        self._accept_retrying.discard(fd)
        if sock.fileno() == -1:  # the server closed meanwhile
            return
        self._start_serving(protocol_factory, sock, *rest)  # type: ignore[attr-defined]
