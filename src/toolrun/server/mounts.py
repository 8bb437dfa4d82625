"""Engines the HTTP server starts with its lifespan: jobs (their sweep) and semantic search (its vectors)."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from ..errors import ToolrunError
from .parts import ServerParts

log = logging.getLogger("toolrun.server")


def mount_semantic(parts: ServerParts) -> None:
    """Semantic search, when the settings and the installed extra allow it: started by each serving process (a
    forked worker has its own threads), its tool vectors built in the background while search stays lexical."""

    from ..search.semantic import extra_installed, from_settings

    semantic = from_settings(parts.settings)
    if semantic is None:
        return
    if parts.settings.search_embeddings_url and extra_installed():
        # with an embeddings endpoint the workers rank (with the local model, the helper process does)
        import numpy  # noqa: F401 (loaded before the workers fork: its memory is shared, not copied per worker)
    parts.service.rank_by_meaning(semantic, before_fork=True)

    @contextlib.asynccontextmanager
    async def lifespan() -> Any:
        parts.service.rank_by_meaning(semantic)
        if parts.reloader is not None:  # a reloaded catalog gets its vectors (search lexical meanwhile)
            parts.reloader.listeners.append(lambda: parts.service.rank_by_meaning(semantic))
        yield

    parts.lifespans.append(lifespan)


def mount_jobs(parts: ServerParts) -> None:
    """Jobs in the shared state (the state file, or Redis); a reload expires pending calls of changed tools;
    a sweep applies approval deadlines and dead runners to the jobs due, and drops those past their retention;
    a stopping server fails the jobs it runs, with the reason."""
    import asyncio
    from contextlib import asynccontextmanager

    jobs = parts.service.use_jobs(parts.settings, parts.access)
    jobs.serves_catalog = True  # a server's catalog is the one its jobs were asked of: a change there expires them
    if parts.reloader is not None:
        parts.reloader.listeners.append(jobs.expire_changed)

    async def sweep() -> None:
        while True:
            await asyncio.sleep(5.0)
            try:
                await jobs.sweep()
            except ToolrunError as exc:
                log.warning("job sweep: %s", exc.summary)

    @asynccontextmanager
    async def lifespan() -> Any:
        task = asyncio.get_running_loop().create_task(sweep())
        try:
            yield
        finally:
            task.cancel()
            await jobs.stop()

    parts.lifespans.append(lifespan)
