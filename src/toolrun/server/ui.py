"""The browser UI at /ui (placeholder until the UI lands): enabled but not built -> 404 + a warning."""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

log = logging.getLogger("toolrun.ui")


def ui_routes(settings: Any) -> list[BaseRoute]:
    log.warning("ui_enabled is true but the UI was never built: /ui answers 404")

    async def not_built(request: Request) -> Response:
        return JSONResponse({"error": "not found"}, status_code=404)

    return [Route("/ui", not_built), Route("/ui/{path:path}", not_built)]
