"""The HTTP door: Starlette routes over the one ToolService.

Every route is one row of ROUTES (routes.py): its path, method, handler, auth mode and OpenAPI
operation; `create_app` builds the router from the rows and /openapi.json documents the same rows.
A row's auth mode is applied before its handler runs (`identity_from_scope`); a ToolrunError a
handler raises becomes its JSON response in one place, the app's exception handler (errors.py).
POST /tools/{key} is the plain-ASGI `ToolCall` (toolcall.py); `Guard` (guard.py) is the
middleware for Host/Origin checks, CORS and the access log.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from .. import formatting
from ..access import Access
from ..errors import Unauthorized, UsageError
from ..metrics import CONTENT_TYPE, Metrics
from ..models import Identity
from ..service import ToolService
from ..settings import Settings
from ..words import plural
from .errors import EXCEPTION_HANDLERS, json_error
from .guard import guarded, redact_query, scrub_keys
from .jobroutes import JobRoutes, job_metrics
from .request import MAX_PAGE, bool_param, choice, identity_from_scope, int_param, single
from .routes import ROUTES, RouteDef
from .toolcall import ToolCall

# Names other modules (and tests) import from here.
__all__ = [
    "ROUTES",
    "Backends",
    "ToolCall",
    "create_app",
    "guarded",
    "identity_from_scope",
    "json_error",
    "redact_query",
    "scrub_keys",
]

log = logging.getLogger("toolrun.server")


@dataclass
class Backends:
    """Everything the routes need, built once by `toolrun serve` (or a test)."""

    service: ToolService
    settings: Settings
    access: Access
    metrics: Metrics
    checks: dict[str, Callable[[], Awaitable[None]]] = field(default_factory=dict)
    lifespans: list[Callable[[], Any]] = field(default_factory=list)
    extra_routes: list[BaseRoute] = field(default_factory=list)
    # Hot reload (server/admin.py): POST /admin/reload runs this, with the admin identity already checked.
    reload: Callable[[], Awaitable[Response]] | None = None
    reloader: Any = None  # toolrun.reload.Reloader, when `serve` wires hot reload
    mcp_endpoint: Any = None  # the /mcp ASGI endpoint (run.mount_mcp): the guard hands it POSTs directly


class Routes(JobRoutes):
    """The JSON routes' handlers: each gets the request and the identity its ROUTES row's `auth` gave."""

    def __init__(self, backends: Backends) -> None:
        self.b = backends
        self.service = backends.service
        self.settings = backends.settings
        self._metrics_nets = [ipaddress.ip_network(n, strict=False) for n in self.settings.metrics_allow_ips]

    async def healthz(self, request: Request, identity: Identity) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request, identity: Identity) -> Response:
        timeout = self.settings.readiness_timeout
        names = list(self.b.checks)
        results = await asyncio.gather(
            *(asyncio.wait_for(check(), timeout) for check in self.b.checks.values()), return_exceptions=True
        )
        failed = [(name, r) for name, r in zip(names, results, strict=True) if isinstance(r, BaseException)]
        for name, exc in failed:
            log.warning("readiness check %s failed: %s", name, type(exc).__name__ + (f": {exc}" if str(exc) else ""))
        if failed:
            return JSONResponse({"status": "degraded"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def whoami(self, request: Request, identity: Identity) -> Response:
        tool_key = single(request, "explain")
        user = single(request, "user")
        if (tool_key is not None or user is not None) and not identity.is_admin:
            raise Unauthorized()  # explanations name hidden tools: admins only
        body: dict[str, Any] = {
            "username": identity.username,
            "email": identity.email,
            "groups": sorted(identity.groups),
            "tools": [t.key for t in self.service.list(identity)],
        }
        if tool_key is not None and user is None and identity.key_prefix.startswith("jwt:"):
            # The caller came with a bearer token: explain its claims, not a key-store user of that name.
            body["explain"] = await self.b.access.explain_token(
                self.service, identity, tool_key, limiter=self.service.limiter, settings=self.settings
            )
        elif tool_key is not None:
            body["explain"] = await self.b.access.explain(
                self.service,
                user or identity.username,
                tool_key,
                limiter=self.service.limiter,
                settings=self.settings,
            )
        return JSONResponse(body)

    async def list_tools(self, request: Request, identity: Identity) -> Response:
        fmt = choice(request, "format", ("json", "md", "html"), "json")
        paged = single(request, "offset") is not None or single(request, "limit") is not None
        offset = int_param(request, "offset", 0, 0, 1_000_000)
        limit = int_param(request, "limit", MAX_PAGE, 1, MAX_PAGE)
        tools = self.service.list(identity)
        if paged:
            # Server pagination for the UI's empty box: the body stays the spec 2.1 array and
            # the page position travels in headers (X-Total-Count, X-Has-More, X-Next-Offset).
            window = tools[offset : offset + limit]
            has_more = offset + len(window) < len(tools)
            headers = {"X-Total-Count": str(len(tools)), "X-Has-More": "true" if has_more else "false"}
            if has_more:
                headers["X-Next-Offset"] = str(offset + len(window))
            tools = window
        else:
            headers = {}
        if fmt == "md":
            return PlainTextResponse(
                formatting.markdown_page(tools), media_type="text/markdown; charset=utf-8", headers=headers
            )
        if fmt == "html":
            return HTMLResponse(formatting.html_page(tools), headers=headers)
        entries = self.service.entry_json  # each tool's entry encoded once per catalog, joined
        body = b"[" + b",".join([entries(t) for t in tools]) + b"]"
        return Response(body, media_type="application/json", headers=headers)

    async def get_tool(self, request: Request, identity: Identity) -> Response:
        tool = self.service.describe(identity, request.path_params["key"])
        return JSONResponse(tool.entry())

    async def users(self, request: Request, identity: Identity) -> Response:
        with_keys = bool_param(request, "keys")
        return JSONResponse(await self.b.access.users(with_keys))

    async def admin_reload(self, request: Request, identity: Identity) -> Response:
        if self.b.reload is None:
            return JSONResponse({"error": "hot reload is not enabled in this server"}, status_code=404)
        return await self.b.reload()

    async def metrics(self, request: Request, identity: Identity) -> Response:
        # Anonymous by default. `metrics_allow_ips` and `metrics_token` protect it: the series name every
        # tool that was called, hidden ones included. Each one that is set must pass.
        if self._metrics_nets:
            peer = request.client.host if request.client else ""
            try:
                address = ipaddress.ip_address(peer)
            except ValueError:
                address = None
            if address is None or not any(address in net for net in self._metrics_nets):
                return JSONResponse({"error": "forbidden"}, status_code=403)
        token = self.settings.metrics_token
        if token:
            scheme, _, given = request.headers.get("authorization", "").strip().partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
                return JSONResponse(
                    {"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": 'Bearer realm="metrics"'}
                )
        return Response(self.b.metrics.render() + await job_metrics(self.service), media_type=CONTENT_TYPE)

    async def search(self, request: Request, identity: Identity) -> Response:
        query = single(request, "q")
        if query is None:
            query = single(request, "query") or ""
        if len(query) > 500:
            raise UsageError("query parameter 'q' is longer than 500 characters")
        offset = int_param(request, "offset", 0, 0, 1_000_000)
        limit = int_param(request, "limit", 10, 1, MAX_PAGE)
        page = self.service.search(identity, query, offset, limit)
        return JSONResponse(
            {
                "query": query,
                "items": [t.entry() for t in page.items],
                "total": page.total,
                "offset": page.offset,
                "limit": page.limit,
                "has_more": page.has_more,
                "next_offset": page.next_offset,
            }
        )

    async def protected_resource(self, request: Request, identity: Identity) -> Response:
        tokens = self.b.access.tokens
        if tokens is None:
            return JSONResponse({"error": "not found"}, status_code=404)
        from ..oauth import resource_metadata
        from .request import public_base

        resource = request.url.path.removeprefix("/.well-known/oauth-protected-resource")
        return JSONResponse(resource_metadata(tokens.config, public_base(request.scope), resource))

    async def openapi(self, request: Request, identity: Identity) -> Response:
        from .openapi import document

        return JSONResponse(document(ROUTES, self.service.list(identity)))


def create_app(backends: Backends) -> Starlette:
    """The app: one Starlette route per ROUTES row (in its order), then `backends.extra_routes` (/mcp, /ui)."""
    handlers = Routes(backends)
    tool_call = ToolCall(backends)
    access = backends.access

    def endpoint(route: RouteDef) -> Callable[[Request], Awaitable[Response]]:
        handler = getattr(handlers, route.handler)
        mode = route.auth

        async def run(request: Request) -> Response:
            identity = await identity_from_scope(access, request.scope, mode)
            response: Response = await handler(request, identity)
            return response

        return run

    routes: list[BaseRoute] = [
        # POST /tools/{key} is the plain-ASGI ToolCall (it applies its row's `auth` itself).
        Route(r.starlette_path, tool_call if r.handler == "tool_call" else endpoint(r), methods=[r.method])
        for r in ROUTES
    ]
    routes.extend(backends.extra_routes)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        async with AsyncExitStack() as stack:
            for factory in backends.lifespans:
                await stack.enter_async_context(factory())
            log.info("toolrun serving %s", plural(len(backends.service), "tool"))
            yield

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=EXCEPTION_HANDLERS)
    app.state.backends = backends
    app.state.tool_call = tool_call
    from .fastpaths import ToolGet

    app.state.tool_get = ToolGet(backends)
    app.state.mcp_endpoint = backends.mcp_endpoint
    return app
