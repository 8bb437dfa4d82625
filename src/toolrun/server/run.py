"""Wiring for `toolrun serve`: settings -> backends -> the ASGI app -> uvicorn."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..auth import SQLiteKeyStore
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


def build_backends(
    settings: Settings, catalog: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> Backends:
    metrics = Metrics()
    limiter = None
    if settings["rate_limit.enabled"]:
        limiter = MemoryLimiter(int(settings["rate_limit.calls"]), float(settings["rate_limit.window"]))
    service = ToolService.from_paths(
        catalog_paths(catalog, settings),
        settings,
        environ=environ,
        limiter=limiter,
        observer=metrics,
        sessions=MemorySessions(),
        max_concurrent=int(settings["max_concurrent_calls"]),
    )
    store = key_store(settings)
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
        await asyncio.to_thread(store.ping)

    backends.checks = {"search": search_check, "cache": cache_check, "loader": loader_check}
    return backends


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
