"""Hot reload in the server: `POST /admin/reload` (admin; its row is in routes.py), SIGHUP, the hash poll, /readyz.

The reload itself lives in the core (toolrun.catalog.reload.Reloader); this module only wires it into
`toolrun serve`: a route, a signal handler and a background poll started by the app's lifespan,
and a readiness check that fails while the last reload failed.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.responses import JSONResponse, Response

from ..catalog.reload import Reloader
from ..service import load_options
from .parts import ServerParts

log = logging.getLogger("toolrun.server")
RELOAD_WAIT = 600.0  # seconds POST /admin/reload waits for the workers' reload (a huge catalog takes a while)


def mount_reload(
    parts: ServerParts, paths: Sequence[str], environ: Mapping[str, str] | None = None, workers: int = 1
) -> Reloader:
    settings = parts.settings
    reloader = Reloader(parts.service, paths, load_options(settings), environ, observer=parts.metrics)
    interval = settings.reload_interval

    async def catalog_check() -> None:
        reloader.check()

    async def reload_route() -> Response:
        if workers > 1:
            # Every worker must reload, not only the one that took the request: SIGHUP to the supervisor,
            # which passes it to every worker (this one included); answer with this worker's outcome.
            generation = reloader.generation
            os.kill(os.getppid(), signal.SIGHUP)
            found = await reloader.next_result(generation, RELOAD_WAIT)
            if found is None:
                return JSONResponse({"error": "the reload did not finish in time"}, status_code=503)
            result = found
        else:
            result = await reloader.reload("POST /admin/reload")
        return JSONResponse(result.body(), status_code=200 if result.ok else 422)

    def lifespan() -> Any:
        return reloader.running(interval)

    parts.checks["catalog"] = catalog_check
    parts.reload = reload_route
    parts.lifespans.append(lifespan)
    parts.reloader = reloader
    return reloader
