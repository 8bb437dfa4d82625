"""The HTTP door: the route table's handlers over the one ToolService, and the app built from them.

Every route is one row of ROUTES (routes.py): its path, method, handler, auth mode, how it is served and its
OpenAPI operation. `create_app` builds the dispatcher (dispatch.py) from the rows: each handler is built for
its row's auth mode, a `Routes` method below getting the identity that mode gives; /openapi.json documents
the same rows. A ToolrunError a handler raises becomes its JSON response in one place, the app's exception
handler (httperrors.py). The plain-ASGI handlers of the hot rows are in plain.py; `Guard` (guard.py), in
front of the dispatcher, checks Host and Origin, adds CORS and writes the access log.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp

from .. import formatting, speedups, telemetry
from ..errors import Unauthorized, UsageError
from ..models import Identity
from ..search.relevance import DEFAULT_MIN_SCORE
from ..settings import Settings
from ..telemetry.metrics import CONTENT_TYPE
from ..words import plural
from .dispatch import Dispatch, build
from .guard import Guard
from .jobroutes import JobRoutes, job_metrics
from .parts import ServerParts
from .request import MAX_PAGE, bool_param, choice, int_param, score_param, single
from .routes import ROUTES, RouteDef, for_settings

log = logging.getLogger("toolrun.server")


class Routes:
    """The handlers of the rows served through Starlette: each gets the request and the identity its row's
    auth mode gave (dispatch.endpoint). The job rows' handlers are `jobs`' (jobroutes.JobRoutes)."""

    def __init__(self, parts: ServerParts, rows: tuple[RouteDef, ...] = ROUTES) -> None:
        self.parts = parts
        self.rows = rows  # the table this app serves, which /openapi.json documents
        self.service = parts.service
        self.settings = parts.settings
        self.jobs = JobRoutes(parts.service, parts.settings)
        self._metrics_nets = [ipaddress.ip_network(n, strict=False) for n in self.settings.metrics_allow_ips]

    async def readyz(self, request: Request, identity: Identity) -> Response:
        timeout = self.settings.readiness_timeout
        names = list(self.parts.checks)
        results = await asyncio.gather(
            *(asyncio.wait_for(check(), timeout) for check in self.parts.checks.values()), return_exceptions=True
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
            body["explain"] = await self.parts.access.explain_token(
                self.service, identity, tool_key, limiter=self.service.limiter, settings=self.settings
            )
        elif tool_key is not None:
            body["explain"] = await self.parts.access.explain(
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

    async def users(self, request: Request, identity: Identity) -> Response:
        with_keys = bool_param(request, "keys")
        return JSONResponse(await self.parts.access.users(with_keys))

    async def admin_reload(self, request: Request, identity: Identity) -> Response:
        if self.parts.reload is None:
            return JSONResponse({"error": "hot reload is not enabled in this server"}, status_code=404)
        return await self.parts.reload()

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
        return Response(self.parts.metrics.render() + await job_metrics(self.service), media_type=CONTENT_TYPE)

    async def search(self, request: Request, identity: Identity) -> Response:
        query = single(request, "q")
        if query is None:
            query = single(request, "query") or ""
        if len(query) > 500:
            raise UsageError("query parameter 'q' is longer than 500 characters")
        offset = int_param(request, "offset", 0, 0, 1_000_000)
        limit = int_param(request, "limit", 10, 1, MAX_PAGE)
        min_score = score_param(request, "min_score", DEFAULT_MIN_SCORE)
        explain = choice(request, "explain", ("0", "1", "false", "true"), "0") in ("1", "true")
        page = self.service.search(identity, query, offset, limit, min_score, explain)
        items = [self.service.entry(t) for t in page.items]
        for i, item in enumerate(items):
            if page.scores is not None:
                item["score"] = page.scores[i]
            if page.explain is not None:
                item["explain"] = page.explain[i]
        return JSONResponse(
            {
                "query": query,
                "items": items,
                "min_score": min_score,
                "total": page.total,
                "offset": page.offset,
                "limit": page.limit,
                "has_more": page.has_more,
                "next_offset": page.next_offset,
            }
        )

    async def protected_resource(self, request: Request, identity: Identity) -> Response:
        tokens = self.parts.access.tokens
        if tokens is None:
            return JSONResponse({"error": "not found"}, status_code=404)
        from ..access.oauth import resource_metadata
        from .request import public_base

        resource = request.url.path.removeprefix("/.well-known/oauth-protected-resource")
        return JSONResponse(resource_metadata(tokens.config, public_base(request.scope), resource))

    async def openapi(self, request: Request, identity: Identity) -> Response:
        from .openapi import document

        return JSONResponse(document(self.rows, self.service.list(identity)))


def create_app(parts: ServerParts) -> Dispatch:
    """The app: the dispatcher of the ROUTES rows as `parts.settings` serve them, its router ending with
    `parts.extra_routes` (/ui); `app.state.parts` is `parts`."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        async with AsyncExitStack() as stack:
            for factory in parts.lifespans:
                await stack.enter_async_context(factory())
            log.info("toolrun serving %s", plural(len(parts.service), "tool"))
            yield

    rows = for_settings(ROUTES, parts.settings)
    app = build(rows, parts, Routes(parts, rows), lifespan=lifespan, hot=speedups.on("hot_routes"))
    app.state.parts = parts
    return app


def guarded(app: Dispatch, settings: Settings) -> ASGIApp:
    """`app` behind the guard (guard.py), and behind the request span when tracing is on (tracing.py)."""
    guard = Guard(app, list(settings.allowed_hosts), list(settings.allowed_origins))
    if telemetry.TRACING is None:
        return guard
    from .tracing import Traced

    return Traced(guard, telemetry.TRACING)
