"""Wiring for `toolrun serve`: settings -> backends -> the ASGI app -> uvicorn."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..auth import SQLiteKeyStore, key_from
from ..metrics import Metrics
from ..models import Identity
from ..ratelimit import MemoryLimiter
from ..service import MemorySessions, ToolService, catalog_paths
from ..settings import Settings
from .app import Backends, create_app, guarded

log = logging.getLogger("toolrun.server")


def key_store(settings: Settings) -> Any:
    if settings["redis_url"]:
        from ..redis_store import RedisKeyStore  # type: ignore[import-not-found,unused-ignore]

        return RedisKeyStore(settings["redis_url"])
    return SQLiteKeyStore(settings.dirs["data"] / "toolrun.db")


def shared_state(settings: Settings, store: Any) -> tuple[Any, Any]:
    """(limiter or None, session store): in memory, or in Redis when `redis_url` is set."""
    calls, window = int(settings["rate_limit.calls"]), float(settings["rate_limit.window"])
    if settings["redis_url"]:
        from ..redis_store import RedisLimiter, RedisSessions

        limiter: Any = None
        if settings["rate_limit.enabled"]:
            limiter = RedisLimiter(store, calls, window, fail_open=bool(settings["rate_limit.fail_open"]))
        return limiter, RedisSessions(store)
    return (MemoryLimiter(calls, window) if settings["rate_limit.enabled"] else None), MemorySessions()


def build_backends(
    settings: Settings, catalog: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> Backends:
    metrics = Metrics()
    store = key_store(settings)
    limiter, sessions = shared_state(settings, store)
    service = ToolService.from_paths(
        catalog_paths(catalog, settings),
        settings,
        environ=environ,
        limiter=limiter,
        observer=metrics,
        sessions=sessions,
        max_concurrent=int(settings["max_concurrent_calls"]),
    )
    backends = Backends(service=service, settings=settings, store=store, metrics=metrics)

    async def search_check() -> None:
        service.registry.search(Identity(groups=frozenset({"admin"}), anonymous=False), "health", 0, 1)

    async def cache_check() -> None:
        ping = getattr(service.sessions, "ping", None)
        if ping is not None:
            await ping()

    async def loader_check() -> None:
        if service.catalog is None:
            raise RuntimeError("no catalog loaded")
        await store.aping()

    backends.checks = {"search": search_check, "cache": cache_check, "loader": loader_check}
    mount_mcp(backends)
    if settings["ui_enabled"]:
        from .ui import ui_routes

        backends.extra_routes.extend(ui_routes(settings))
    return backends


def mount_mcp(backends: Backends) -> None:
    """The MCP streamable-HTTP endpoint at /mcp, on the same app, port and ToolService."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.routing import Route

    from .mcp import McpDoor, build_server

    settings, store = backends.settings, backends.store

    def identify(ctx: Any) -> Identity:
        # McpKeyGate resolved the caller (asynchronously) and left it in the request's state.
        request = getattr(ctx, "request", None)
        state = request.scope.get("state", {}) if request is not None else {}
        identity = state.get("toolrun_identity")
        return identity if isinstance(identity, Identity) else Identity()

    door = McpDoor(backends.service, identify, direct=bool(settings["mcp_direct"]))
    hosts = list(settings["allowed_hosts"])
    if "*" in hosts:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    else:
        host_patterns = sorted({h if h.startswith("[") or ":" not in h else f"[{h}]" for h in hosts})
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[p for h in host_patterns for p in (h, f"{h}:*")],
            allowed_origins=[
                *settings["allowed_origins"],
                *(
                    f"{scheme}://{h}{port}"
                    for h in host_patterns
                    for scheme in ("http", "https")
                    for port in ("", ":*")
                ),
            ],
        )
    manager = StreamableHTTPSessionManager(
        app=build_server(door),
        security_settings=security,
        max_request_body_size=int(settings["max_body_bytes"]),
    )
    backends.lifespans.append(manager.run)
    endpoint = McpKeyGate(StreamableHTTPASGIApp(manager), store)
    backends.extra_routes.append(Route("/mcp", endpoint=endpoint, methods=["GET", "POST", "DELETE"]))


class McpKeyGate:
    """A key that is present but does not resolve gets 401 before the MCP machinery runs."""

    def __init__(self, app: Any, store: Any) -> None:
        self.app = app
        self.store = store

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.requests import Request
        from starlette.responses import JSONResponse

        from ..errors import ToolrunError
        from .app import json_error

        request = Request(scope)
        client = request.client.host if request.client else ""
        key = key_from(request.headers, request.query_params)
        try:
            user = await self.store.aresolve(key) if key else None
        except ToolrunError as exc:
            await json_error(exc)(scope, receive, send)
            return
        if key and user is None:
            await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
            return
        identity = user.identity(client) if user is not None else Identity(client=client)
        scope.setdefault("state", {})["toolrun_identity"] = identity
        await self.app(scope, receive, send)


def serve_stdio(settings: Settings, catalog: Sequence[str] | None = None) -> None:
    """MCP over stdin/stdout for desktop agents: stdout carries only the protocol."""
    import os

    import anyio
    from mcp.server.stdio import stdio_server

    from ..errors import Unauthorized
    from .mcp import McpDoor, build_server, new_stdio_session

    configure_logging(settings["log_level"])
    store = key_store(settings)
    limiter, sessions = shared_state(settings, store)
    service = ToolService.from_paths(catalog_paths(catalog, settings), settings, limiter=limiter, sessions=sessions)
    raw_key = os.environ.get("TOOLRUN_API_KEY", "").strip()
    if raw_key:
        user = store.resolve(raw_key)
        if user is None:
            raise Unauthorized("TOOLRUN_API_KEY is not a valid, unexpired, unrevoked key")
        identity = user.identity("stdio")
    else:
        identity = Identity.operator()
    door = McpDoor(
        service, lambda ctx: identity, direct=bool(settings["mcp_direct"]), stdio_session=new_stdio_session()
    )
    server = build_server(door)
    log.info("MCP over stdio as %s, %d tools", identity.username, len(service.list(identity)))

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


def build_app(settings: Settings, catalog: Sequence[str] | None = None) -> Any:
    backends = build_backends(settings, catalog)
    return guarded(create_app(backends), settings)


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("toolrun")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def serve(settings: Settings, catalog: Sequence[str] | None = None) -> None:
    import uvicorn

    configure_logging(settings["log_level"])
    app = build_app(settings, catalog)
    try:
        import httptools  # noqa: F401

        http = "httptools"
    except ImportError:  # pragma: no cover
        http = "h11"
    config = uvicorn.Config(
        app,
        host=settings["host"],
        port=int(settings["port"]),
        loop="asyncio",
        http=http,
        lifespan="on",
        access_log=False,
        log_config=None,
        server_header=False,
        timeout_graceful_shutdown=max(1, round(float(settings["shutdown_grace"]))),
        timeout_keep_alive=5,
    )
    server = uvicorn.Server(config)
    log.info("listening on http://%s:%s", settings["host"], settings["port"])
    server.run()
