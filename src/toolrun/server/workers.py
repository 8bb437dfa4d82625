"""`toolrun serve --workers N`: one listening socket, N forked worker processes, one supervisor.

The parent loads the catalog, builds the app and binds one listening socket per worker on the same
port (SO_REUSEPORT), then forks the workers: they share the loaded catalog copy-on-write (it was
frozen out of the collector's sight, so a collection does not touch, and copy, its pages), and each
runs its own uvicorn event loop on its socket; the kernel spreads new connections over them.

The supervisor:
- forwards SIGTERM (and SIGINT, as SIGTERM: uvicorn takes a second SIGINT as "quit now") to every
  worker and waits for all of them to drain (`shutdown_grace`), then exits 0;
- forwards SIGHUP to every worker (each reloads its own catalog);
- replaces a worker that dies while the server runs; a worker that fails within its first
  seconds (its startup failed) stops the whole server with status 1 instead of a restart loop.

Workers die with the supervisor (PR_SET_PDEATHSIG): a SIGKILLed parent leaves no orphans.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import time
from typing import Any

from ..exec.procguard import die_with_parent

log = logging.getLogger("toolrun.server")

MAX_DEFAULT_WORKERS = 8  # the default (one per CPU) stops here: more rarely pays for their memory
STARTUP_WINDOW = 5.0  # seconds: a worker that fails sooner failed to start


def default_workers() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - Linux has sched_getaffinity
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_WORKERS))


def resolve_workers(value: int) -> int:
    """The `workers` setting: 0 means one per CPU (at most MAX_DEFAULT_WORKERS)."""
    from ..errors import UsageError

    if value < 0:
        raise UsageError(f"setting workers: expected 0 (one per CPU) or a positive number, got {value}")
    return value or default_workers()


def bind(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one address (SO_REUSEPORT): one per worker.

    The kernel spreads new connections evenly over them. (One shared socket would not: asyncio
    accepts every pending connection at once, so the first worker to wake takes a whole burst.)"""
    from ..errors import UsageError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and an
            # accepted socket inherits proto 0 from a listener made without it (Nagle + delayed ACK: 40 ms a
            # response on a keep-alive connection).
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host.strip("[]"), port))
            port = sock.getsockname()[1]  # with port 0, every socket takes the port the first one got
            sock.listen(2048)
            sock.set_inheritable(True)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sockets


class Supervisor:
    def __init__(self, run_worker: Any, listeners: list[socket.socket], on_exit: Any = None) -> None:
        self.run_worker = run_worker  # called in each forked child with its socket; returns its exit status
        self.listeners = listeners  # one per worker; a replacement worker takes over its predecessor's socket
        self.workers = len(listeners)
        self.on_exit = on_exit  # called with a dead worker's pid (metrics clean-up)
        self.children: dict[int, float] = {}  # pid -> start time
        self.slots: dict[int, int] = {}  # pid -> index of its socket
        self.stopping = False
        self.failed = False

    def spawn(self, slot: int) -> None:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                die_with_parent()
                if os.getppid() != parent:  # the parent died before prctl took effect
                    os._exit(0)
                for sig in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)
                # A forwarded SIGHUP never kills a worker: the worker's own handler (catalog reload), if any,
                # replaces this one.
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                for index, other in enumerate(self.listeners):
                    if index != slot:
                        other.close()
                code = self.run_worker(self.listeners[slot])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                log.exception("worker %d crashed", os.getpid())
            finally:
                logging.shutdown()
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        self.children[pid] = time.monotonic()
        self.slots[pid] = slot
        if self.stopping:  # a stop signal came in while this worker was being forked
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def forward(self, signum: int, frame: Any = None) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = True
            signum = signal.SIGTERM
            # New connections are refused as soon as every worker has closed its copy too (a proxy
            # retries them elsewhere), rather than waiting in the backlog of a server that is leaving.
            for listener in self.listeners:
                listener.close()
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def run(self) -> int:
        """Start the workers and supervise them until they have all exited; the exit status."""
        previous = {sig: signal.signal(sig, self.forward) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        try:
            for slot in range(self.workers):
                self.spawn(slot)
            while self.children:
                try:
                    pid, status = os.wait()
                except ChildProcessError:  # pragma: no cover - nothing left to wait for
                    break
                started = self.children.pop(pid, None)
                slot = self.slots.pop(pid, 0)
                if started is None:
                    continue
                if self.on_exit is not None:
                    self.on_exit(pid)
                if self.stopping:
                    continue
                code = os.waitstatus_to_exitcode(status)
                how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
                if time.monotonic() - started < STARTUP_WINDOW and code > 0:
                    log.error("worker %d %s at startup: stopping the server", pid, how)
                    self.failed = True
                    self.forward(signal.SIGTERM)
                    continue
                log.warning("worker %d %s; starting a new one", pid, how)
                self.spawn(slot)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 1 if self.failed else 0
