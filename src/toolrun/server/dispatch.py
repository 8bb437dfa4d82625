"""One road per request: the dispatcher, built from the route table (routes.py).

Every row of ROUTES is one Starlette route of the router, with its handler built for the row's auth mode:
a `serve="plain"` row's handler (plain.PLAIN_HANDLERS, plain ASGI) is made with the mode and applies it; an
`app.Routes` method gets the identity the mode gives (`endpoint`). The plain rows are the hot ones: the
dispatcher hands their requests to the very same handler from a dict lookup, without the router (the
`hot_routes` speedup, speedups.py; with it off, every request goes through the router). So a request takes
the same handler, with the same auth mode, whichever road it takes, and its headers (an Origin header or
not) never choose the road: the guard (guard.py) checks Host and Origin and adds CORS before this runs.

The dispatcher leaves the status it sent in the scope (`plain.STATUS`), for the access log, and answers 503 to a
request the stopping server cancelled before its answer started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route, request_response
from starlette.types import ASGIApp, Lifespan, Receive, Scope, Send

from .httperrors import EXCEPTION_HANDLERS
from .plain import PLAIN_HANDLERS, STATUS, PlainHandler, recording
from .request import identity_from_scope

if TYPE_CHECKING:
    from starlette.requests import Request

    from ..access import Access, Mode
    from ..models import Identity
    from .parts import ServerParts
    from .routes import RouteDef

log = logging.getLogger("toolrun.server")

Endpoint = Callable[["Request"], Awaitable[Response]]
Handler = PlainHandler | Endpoint


def endpoint(handler: Callable[[Request, Identity], Awaitable[Response]], access: Access, mode: Mode) -> Endpoint:
    """A `Routes` method as a Starlette endpoint: the identity its row's auth mode gives, then the handler."""

    async def run(request: Request) -> Response:
        identity = await identity_from_scope(access, request.scope, mode)
        return await handler(request, identity)

    return run


def row_handler(row: RouteDef, parts: ServerParts, handlers: object) -> Handler | None:
    """The handler of `row`, built for its auth mode; None when its part is not mounted."""
    factory = PLAIN_HANDLERS.get(row.handler)
    if factory is not None:
        return factory(parts, row.auth)
    if row.serve == "plain":
        raise ValueError(f"{row.method} {row.path}: a plain row's handler must be one of {sorted(PLAIN_HANDLERS)}")
    return endpoint(attrgetter(row.handler)(handlers), parts.access, row.auth)  # `jobs.get_job`: a group's


class ByMethod:
    """One Starlette route for several rows of one path and handler (the /mcp endpoint's methods), so that a
    405 names all their methods."""

    def __init__(self, apps: Mapping[str, ASGIApp]) -> None:
        self.apps = dict(apps)
        if "GET" in self.apps:
            self.apps.setdefault("HEAD", self.apps["GET"])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.apps[scope["method"]](scope, receive, send)


def _asgi(handler: Handler) -> ASGIApp:
    if isinstance(handler, PlainHandler):
        return handler
    return request_response(handler)


def router_routes(served: Sequence[tuple[RouteDef, Handler]]) -> list[BaseRoute]:
    """One Starlette route per row, in the table's order; consecutive rows of one path and handler share one."""
    groups: list[list[tuple[RouteDef, Handler]]] = []
    for row, handler in served:
        last = groups[-1][0][0] if groups else None
        if last is not None and (last.path, last.handler) == (row.path, row.handler):
            groups[-1].append((row, handler))
        else:
            groups.append([(row, handler)])
    routes: list[BaseRoute] = []
    for group in groups:
        row, handler = group[0]
        methods = [r.method for r, _ in group]
        if len(group) == 1:
            routes.append(Route(row.starlette_path, handler, methods=methods))
        else:
            routes.append(Route(row.starlette_path, ByMethod({r.method: _asgi(h) for r, h in group}), methods=methods))
    return routes


PlainTable = dict[str, dict[str, PlainHandler]]  # path (or path prefix) -> method -> handler


def plain_tables(served: Sequence[tuple[RouteDef, Handler]]) -> tuple[PlainTable, PlainTable]:
    """The plain rows by exact path, and by path prefix (a path ending in `{key}`, the rest of the path)."""
    exact: PlainTable = {}
    prefixed: PlainTable = {}
    for row, handler in served:
        if row.serve != "plain":
            continue
        if "{" not in row.path:
            exact.setdefault(row.path, {})[row.method] = handler  # type: ignore[assignment]
        elif row.path.endswith("/{key}") and row.path.count("{") == 1:
            prefixed.setdefault(row.path[: -len("{key}")], {})[row.method] = handler  # type: ignore[assignment]
        else:
            raise ValueError(f"{row.method} {row.path}: a plain row's path is exact, or ends with its one {{key}}")
    for prefix, methods in prefixed.items():
        for row, _ in served:
            if row.method in methods and row.serve != "plain" and row.path.startswith(prefix):
                raise ValueError(f"{row.method} {row.path} is under the plain row {row.method} {prefix}{{key}}")
    return exact, prefixed


class Dispatch:
    """The app under the guard: a plain row's handler from a dict lookup, else the router (see the module)."""

    def __init__(self, router: Starlette, exact: PlainTable, prefixed: PlainTable) -> None:
        self.router = router
        self.exact = exact
        self.prefixed = tuple(prefixed.items())

    @property
    def state(self) -> Any:
        return self.router.state

    @property
    def routes(self) -> list[BaseRoute]:
        return self.router.routes

    def by_prefix(self, path: str) -> dict[str, PlainHandler] | None:
        """The handlers, by method, of the plain row whose path prefix (`/tools/`) takes `path`, if any."""
        for prefix, handlers in self.prefixed:
            if path.startswith(prefix):
                return handlers
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.router(scope, receive, send)
            return
        # Mounted under a prefix (root_path), the router knows where the route's path starts. Else a plain row's
        # handler: an exact path (one dict lookup, inline: every hot request), or a path prefix.
        handler = None
        if not scope.get("root_path"):
            path = scope["path"]
            by_method = self.exact.get(path)
            if by_method is None:
                by_method = self.by_prefix(path)
            if by_method is not None:
                handler = by_method.get(scope["method"])
        try:
            if handler is None:
                await self.router(scope, receive, recording(scope, send))
            else:
                scope[STATUS] = await handler.handle(scope, receive, send)
        except asyncio.CancelledError:
            await stopped(scope, receive, send)


async def stopped(scope: Scope, receive: Receive, send: Send) -> None:
    """uvicorn cancels the calls still running once `shutdown_grace` is over (each tool's process group is
    killed on the way out): answer if nothing was sent yet, and end quietly rather than with uvicorn's
    "Exception in ASGI application" traceback."""
    if not scope.get(STATUS):
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await PlainTextResponse(
                "ShuttingDown: the server stopped before the call finished; retry",
                status_code=503,
                headers={"Retry-After": "1", "Connection": "close"},
            )(scope, receive, recording(scope, send))
    log.warning("%s %s cancelled: the server is shutting down", scope["method"], scope.get("path", ""))


def build(
    rows: Sequence[RouteDef], parts: ServerParts, handlers: object, *, lifespan: Lifespan[Any], hot: bool
) -> Dispatch:
    """The dispatcher of `rows` over `parts` (`handlers`: the `app.Routes` whose methods rows name), its router
    ending with `parts.extra_routes`; `hot`: plain rows are taken without the router (`hot_routes`)."""
    served = [(row, h) for row in rows if (h := row_handler(row, parts, handlers)) is not None]
    router = Starlette(
        routes=[*router_routes(served), *parts.extra_routes], lifespan=lifespan, exception_handlers=EXCEPTION_HANDLERS
    )
    exact, prefixed = plain_tables(served)  # checked whether `hot` or not
    return Dispatch(router, exact, prefixed) if hot else Dispatch(router, {}, {})
