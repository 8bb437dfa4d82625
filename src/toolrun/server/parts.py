"""`ServerParts`: what the HTTP server is made of, built once by `toolrun serve` (run.build_parts) or a test.

The mounts (admin.py, mounts.py, mcp/endpoint.mount_mcp, the UI) add their part here; `app.create_app` builds the
dispatcher and the router from the route table (routes.py) over these parts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..access import Access
from ..service import ToolService
from ..settings import Settings
from ..telemetry.metrics import Metrics

if TYPE_CHECKING:
    from starlette.responses import Response
    from starlette.routing import BaseRoute
    from starlette.types import ASGIApp

    from ..access import Mode


@dataclass
class ServerParts:
    """The service and what the routes need beside it; mounts add theirs before the app is built."""

    service: ToolService
    settings: Settings
    access: Access
    metrics: Metrics
    checks: dict[str, Callable[[], Awaitable[None]]] = field(default_factory=dict)
    lifespans: list[Callable[[], Any]] = field(default_factory=list)
    extra_routes: list[BaseRoute] = field(default_factory=list)
    # Hot reload (server/admin.py): POST /admin/reload runs this, with the admin identity already checked.
    reload: Callable[[], Awaitable[Response]] | None = None
    reloader: Any = None  # toolrun.catalog.reload.Reloader, when `serve` wires hot reload
    # The /mcp endpoint for a row's auth mode (mcp/endpoint.mount_mcp); None: no /mcp route.
    mcp: Callable[[Mode], ASGIApp] | None = None
