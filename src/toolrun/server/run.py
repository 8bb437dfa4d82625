"""Wiring for `toolrun serve`: settings -> the server's parts -> the ASGI app -> uvicorn."""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from .. import speedups, telemetry
from ..access import Access, Mode
from ..access.audit import open_audit
from ..catalog.problems import warning_lines
from ..errors import PayloadTooLarge, ToolrunError
from ..models import Identity
from ..service import ToolService, catalog_paths
from ..settings import Settings
from ..state import McpSessionStore, SharedState
from ..telemetry.metrics import Metrics
from ..words import plural
from .accesslog import configure_logging
from .app import create_app, guarded
from .httperrors import json_error
from .mounts import mount_jobs, mount_semantic
from .parts import ServerParts
from .protocol import http_protocol
from .request import UNPARSED, Head, Posted, head, identity_from_scope, is_json_media, parse_json_value, read_body
from .stop import SHUTDOWN_MARGIN, hard_stop_after, ignore_signal

if TYPE_CHECKING:
    from .mcp.sessions import McpSessionGate

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


def mount_mcp(parts: ServerParts, mcp_sessions: McpSessionStore | None = None) -> None:
    """The MCP streamable-HTTP endpoint at /mcp, on the same app, port and ToolService.

    Served statelessly by the SDK (any worker or replica answers any request); the handshake era's
    sessions are toolrun's own, in the shared store (see mcp/sessions.py)."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    from .mcp.door import McpDoor, build_server
    from .mcp.fast import McpFastPath
    from .mcp.sessions import McpSessionGate

    settings = parts.settings

    def identify(ctx: Any) -> Identity:
        # McpKeyGate resolved the caller (asynchronously) and left it in the request's state.
        request = getattr(ctx, "request", None)
        state = request.scope.get("state", {}) if request is not None else {}
        identity = state.get("toolrun_identity")
        return identity if isinstance(identity, Identity) else Identity()

    from .mcp.stream import StreamHub

    sessions = mcp_sessions if mcp_sessions is not None else SharedState(settings).mcp_sessions()
    door = McpDoor(parts.service, identify, direct=settings.mcp_direct)
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


def serve_stdio(settings: Settings, catalog: Sequence[str] | None = None) -> None:
    """MCP over stdin/stdout for desktop agents: stdout carries only the protocol.

    The key and the catalog are checked before the MCP SDK is imported (it is slow to import),
    so a misconfigured desktop client gets its error at once."""
    import os

    from ..errors import Unauthorized

    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a closed pipe to a tool's stdin is an error, not our death
    configure_logging(settings.log_level, settings.log_format)
    telemetry.setup(os.environ)  # OTEL_* variables: off (nothing imported) unless they ask for traces
    access = Access.from_settings(settings)
    state = SharedState(settings, keys=access.store)
    service = ToolService.from_paths(
        catalog_paths(catalog, settings),
        settings,
        access=access,
        limiter=state.limiter(),
        sessions=state.sessions(),
        audit=open_audit(settings.audit_log),
    )
    log_catalog_warnings(service)
    service.use_jobs(settings, access)
    raw_key = os.environ.get("TOOLRUN_API_KEY", "").strip()
    if raw_key:
        try:
            identity = access.identify_now(raw_key, "required", "stdio")
        except Unauthorized:
            raise Unauthorized("TOOLRUN_API_KEY is not a valid, unexpired, unrevoked key") from None
    else:
        identity = Identity.operator()
    protect_process()  # before any tool runs; after the checks, so a failed start prints only its reason

    import anyio
    from mcp.server.stdio import stdio_server

    from .mcp.door import McpDoor, build_server, new_stdio_session
    from .mcp.stream import StreamHub

    door = McpDoor(service, lambda ctx: identity, direct=settings.mcp_direct, stdio_session=new_stdio_session())
    # Only its subscriptions/listen is used here: how a 2026-07-28 client over stdio hears of a reload.
    streams = StreamHub(
        None, keepalive=settings.mcp_stream_keepalive, write_timeout=0, max_streams=settings.mcp_max_streams
    )
    server = build_server(door, list_changed=True, listen=streams.listen)
    log.info("MCP over stdio as %s, %s", identity.username, plural(len(service.list(identity)), "tool"))
    if (problem := service.sandbox_problem()) is not None:
        log.warning("%s; their calls fail", problem)

    from ..catalog.reload import Reloader
    from ..service import load_options

    reloader = Reloader(service, catalog_paths(catalog, settings), load_options(settings))
    reloader.listeners.append(door.catalog_changed)
    reloader.listeners.append(streams.catalog_changed)

    import mcp_types
    from mcp.shared.message import SessionMessage

    from .mcp.stdio import StrictLines, claim_stdin

    lines = StrictLines(anyio.wrap_file(claim_stdin()))  # the JSON rule of every door, before the SDK parses

    async def main() -> None:
        transport = stdio_server(stdin=lines)  # type: ignore[arg-type]  # any async iterable of lines will do
        async with reloader.running(settings.reload_interval), transport as (read_stream, write_stream):

            async def send(raw: dict[str, Any]) -> None:
                message = mcp_types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
                await write_stream.send(SessionMessage(message))

            lines.send = send
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        telemetry.shutdown()


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
