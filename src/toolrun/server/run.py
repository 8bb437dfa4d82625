"""Wiring for `toolrun serve`: settings -> the server's parts -> the ASGI app -> uvicorn."""

from __future__ import annotations

import gc
import logging
import os
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from .. import telemetry
from ..access import Access
from ..access.audit import open_audit
from ..catalog.problems import warning_lines
from ..service import ToolService, catalog_paths
from ..settings import Settings
from ..state import SharedState
from ..telemetry.metrics import Metrics
from ..words import plural
from .accesslog import configure_logging
from .app import create_app, guarded
from .mcp.endpoint import mount_mcp
from .mounts import mount_jobs, mount_semantic
from .parts import ServerParts
from .protocol import http_protocol
from .stop import SHUTDOWN_MARGIN, hard_stop_after, ignore_signal

log = logging.getLogger("toolrun.server")


def build_parts(
    settings: Settings,
    catalog: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    workers: int = 1,
    metrics_dir: str | None = None,
) -> ServerParts:
    metrics = Metrics(metrics_dir)
    access = Access.from_settings(settings)
    state = SharedState(settings, workers, keys=access.store)
    service = ToolService.from_paths(
        catalog_paths(catalog, settings),
        settings,
        environ=environ,
        access=access,
        limiter=state.limiter(),
        observer=metrics,
        sessions=state.sessions(),
        # One pool for the whole server: with workers, in memory they all share (made here, before the fork).
        slots=state.slots(),
        queue_timeout=settings.queue_timeout,
        audit=open_audit(settings.audit_log),
    )
    parts = ServerParts(service=service, settings=settings, access=access, metrics=metrics)
    parts.checks = service.readiness_checks()
    if (problem := service.sandbox_problem()) is not None:
        log.warning("%s; their calls fail, and /readyz reports the sandbox check failed", problem)
    from .admin import mount_reload

    mount_reload(parts, catalog_paths(catalog, settings), service.environ, workers)
    mount_jobs(parts)
    mount_mcp(parts, state.mcp_sessions())
    mount_semantic(parts)
    if settings.ui_enabled:
        from .ui import ui_routes

        parts.extra_routes.extend(ui_routes(settings))
    return parts


def log_catalog_warnings(service: ToolService) -> None:
    """The catalog's warnings on the server's log at start (stderr): a warning is no reason to refuse to
    serve, but nobody should serve an unquoted value unawares."""
    for line in warning_lines(service.catalog_warnings()):
        log.warning("%s", line)


def build_app(
    settings: Settings, catalog: Sequence[str] | None = None, *, workers: int = 1, metrics_dir: str | None = None
) -> Any:
    parts = build_parts(settings, catalog, workers=workers, metrics_dir=metrics_dir)
    return guarded(create_app(parts), settings)


def protect_process(watchdog: bool = True) -> None:
    """What every serving process (stdio, HTTP, each worker) does first: non-dumpable, the
    descriptor limit raised, a warning when root, and the watchdog that kills this server's tool
    processes when it dies (see procguard)."""
    from ..exec.procguard import protect_server, start_watchdog

    protect_server(log)
    if watchdog:
        start_watchdog(log)


def serve(settings: Settings, catalog: Sequence[str] | None = None) -> None:
    """`toolrun serve`: one process (`workers` = 1), or a supervisor and its forked workers."""
    import shutil
    import tempfile

    import uvicorn

    from ..exec.heap import big_blocks_mapped
    from .loop import server_loop
    from .workers import Supervisor, bind, resolve_workers

    # `toolrun` gives SIGPIPE its default action (for `toolrun list | head`); a server must not die when it
    # writes into a connection its client has closed: EPIPE stays that connection's error.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    configure_logging(settings.log_level, settings.log_format)
    telemetry.setup(os.environ)  # before the app is built: the request span wraps the guard
    # Big buffers (a large answer, a tool's output, the catalog file being read) get their own mappings, given
    # back when freed: the process does not keep the high-water mark of its largest answers (see heap.py).
    big_blocks_mapped()
    workers = resolve_workers(settings.workers)
    metrics_dir = tempfile.mkdtemp(prefix="toolrun-metrics-") if workers > 1 else None
    try:
        parts = build_parts(settings, catalog, workers=workers, metrics_dir=metrics_dir)
        log_catalog_warnings(parts.service)
        if settings.oauth_issuer:
            log.info(
                "OAuth on: bearer JWTs of %s for audience %s are accepted beside API keys",
                settings.oauth_issuer,
                settings.oauth_audience,
            )
        app = guarded(create_app(parts), settings)
        # Non-dumpable and the descriptor limit are inherited by forked workers; each worker starts its own
        # watchdog (its tools carry its own token). After the app is built: a bad setting or catalog is the
        # only line a failed start prints.
        protect_process(watchdog=workers == 1)
        # Everything loaded so far (the MCP SDK's and pydantic's schemas, the catalog) lives as long as the server:
        # out of the collector's sight, or every full collection walks all of it again (100+ ms pauses at c=32);
        # forked workers then share these pages instead of copying them.
        gc.collect()
        gc.freeze()
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            loop=server_loop(),  # asyncio's selector loop; accept() failures contained
            http=http_protocol(settings.request_timeout),
            ws="none",
            lifespan="on",
            access_log=False,
            log_config=None,
            server_header=False,
            # X-Forwarded-For/-Proto only from the configured proxies (none by default): uvicorn's own default
            # trusts any loopback peer, so a local client could pick its address (and its rate-limit bucket).
            proxy_headers=bool(settings.forwarded_allow_ips),
            forwarded_allow_ips=list(settings.forwarded_allow_ips) or None,
            timeout_graceful_shutdown=max(1, round(settings.shutdown_grace)),
            timeout_keep_alive=5,
        )
        if workers == 1:
            log.info("listening on http://%s:%s", settings.host, settings.port)
            started = _run_server(config)
            telemetry.shutdown()
            if not started:
                raise SystemExit(1)  # uvicorn logged why (port in use, startup failed)
            return
        sockets = bind(settings.host, settings.port, workers)
        log.info("listening on http://%s:%s with %s", settings.host, settings.port, plural(workers, "worker"))

        def run_worker(sock: Any) -> int:
            from ..exec.procguard import start_watchdog

            start_watchdog(log)
            count_reloads(parts, first=sock is sockets[0])
            parts.service.slots.attach(sockets.index(sock))  # this worker's cells of the shared concurrency pool
            started = _run_server(config, sock)
            telemetry.shutdown()  # this worker's queued spans
            return 0 if started else 3

        def worker_exited(pid: int) -> None:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(pid, metrics_dir)  # type: ignore[no-untyped-call]

        code = Supervisor(run_worker, sockets, worker_exited).run()
        for sock in sockets:
            sock.close()
        if code:
            raise SystemExit(code)
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def count_reloads(parts: ServerParts, first: bool) -> None:
    """In a forked worker: only the first worker (and its replacement) counts the server's reloads, so
    one reload of the server is one increment of `svc_catalog_reloads_total` (see toolrun.catalog.reload)."""
    if parts.reloader is not None:
        parts.reloader.counting = first
    if first:
        parts.metrics.count_reloads()


def _run_server(config: Any, sock: Any = None) -> bool:
    """Run uvicorn until it is stopped; whether it had started."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if not self.should_exit:  # the first stop signal: the drain's clock starts, and the hard stop's
                hard_stop_after((self.config.timeout_graceful_shutdown or 0) + SHUTDOWN_MARGIN)
            super().handle_exit(sig, frame)

        async def shutdown(self, sockets: Any = None) -> None:
            from .mcp.stream import end_streams

            end_streams()  # before the drain: it must not wait for clients that only listen
            await super().shutdown(sockets=sockets)

    server = Server(config)
    # uvicorn re-raises the signal that stopped it once it has shut down, with the handler that was in place
    # before it started: with the defaults a SIGTERM'd server would die by that signal after a clean drain.
    # A no-op handler makes a drained shutdown an ordinary exit (status 0).
    previous = {sig: signal.signal(sig, ignore_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run(sockets=[sock] if sock is not None else None)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return bool(server.started)
