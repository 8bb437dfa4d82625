"""The browser UI at /ui: the built single-page app (ui/ -> ui-dist/), served with a strict CSP.

Where the built app is looked for, first match wins (a directory holding index.html):

1. ``$TOOLRUN_UI_DIST`` when set (a deployer's own build, or a test's empty directory); nothing else
   is tried then;
2. the copy packaged in the wheel, ``toolrun/ui-dist`` (pyproject's hatch config puts it there);
3. the checkout's ``ui-dist/`` (committed; editable installs read it, ``make ui`` rebuilds it).

Enabled but never built: /ui answers 404 and one warning is logged when the routes are built
(at startup); startup does not fail (spec 4.1.2).

Routes: ``/ui`` and ``/ui/`` serve index.html; ``/ui/assets/...`` the hashed bundles (cached for a
year, immutable; a missing asset is a 404, never index.html); other files of the build
(favicon.svg, theme-init.js) as themselves; any other path under /ui/ gets index.html (the
app routes on the client, e.g. /ui/tools/ops.disk_usage). Every answer carries the security headers.

With `oauth_issuer` and `oauth_ui_client_id` set, ``/ui/oauth.json`` tells the app how to sign in with the
provider (authorization code with PKCE, docs/oauth.md): the issuer, the client id, the scopes, and the
authorization and token endpoints from the issuer's discovery document; the CSP's connect-src then adds the
issuer's origin (and only it), where the app exchanges the code. Otherwise that route answers 404.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

if TYPE_CHECKING:
    from ..settings import Settings

log = logging.getLogger("toolrun.ui")

ENV_VAR = "TOOLRUN_UI_DIST"


def csp(connect: str = "") -> str:
    """The page's Content-Security-Policy; `connect` (an origin) is added to connect-src."""
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            f"connect-src 'self' {connect}" if connect else "connect-src 'self'",
            "font-src 'self'",
            "object-src 'none'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'self'",
        ]
    )


CSP = csp()

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".map": "application/json",
    ".txt": "text/plain; charset=utf-8",
    ".woff2": "font/woff2",
    ".webmanifest": "application/manifest+json",
}

NOT_BUILT = (
    "The toolrun UI is enabled but was never built (no ui-dist found). Reinstall toolrun, or rebuild it "
    "with `make ui` in a checkout (see docs/ui.md), then restart the server."
)


def dist_candidates(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Directories that may hold the built app, in the order they are tried."""
    env = os.environ if environ is None else environ
    override = env.get(ENV_VAR, "").strip()
    if override:
        return [Path(override).expanduser()]
    here = Path(__file__).resolve()
    package = here.parent.parent  # toolrun/
    candidates = [package / "ui-dist"]
    if package.parent.name == "src" and (package.parent.parent / "pyproject.toml").is_file():
        candidates.append(package.parent.parent / "ui-dist")
    return candidates


def find_dist(environ: Mapping[str, str] | None = None) -> Path | None:
    """The first candidate directory that holds a built index.html, or None."""
    for candidate in dist_candidates(environ):
        if (candidate / "index.html").is_file():
            return candidate.resolve()
    return None


def _secured(response: Response, policy: str = CSP) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    response.headers["Content-Security-Policy"] = policy
    return response


def _not_found(text: str = "Not Found") -> Response:
    return _secured(PlainTextResponse(text, status_code=404, headers={"Cache-Control": REVALIDATE}))


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class ProviderInfo:
    """What the app needs to sign in with the provider (GET /ui/oauth.json): the settings, and the endpoints of
    the issuer's discovery document, fetched on first use and cached for an hour. A failed fetch is tried
    again at most every RETRY seconds, so anonymous visitors cannot make toolrun flood the provider."""

    MAX_AGE = 3600.0
    RETRY = 10.0

    def __init__(self, settings: Settings) -> None:
        self.issuer = settings.oauth_issuer.rstrip("/")
        self.client_id = settings.oauth_ui_client_id
        self.scopes = list(settings.oauth_ui_scopes)
        self.document: dict[str, object] | None = None
        self.error = ""
        self.at = 0.0

    async def get(self) -> dict[str, object]:
        """The document for the app; BackendUnavailable when the provider cannot be used."""
        from ..errors import BackendUnavailable

        now = time.monotonic()
        fresh = self.document is not None and now - self.at < self.MAX_AGE
        if not fresh and not (self.error and now - self.at < self.RETRY):
            try:
                self.document, self.error = await asyncio.to_thread(self.discover), ""
            except BackendUnavailable as exc:
                self.document, self.error = None, str(exc)
            self.at = now
        if self.document is None:
            raise BackendUnavailable(self.error)
        return self.document

    def discover(self) -> dict[str, object]:
        from ..access.oauth import fetch_json
        from ..errors import BackendUnavailable, UsageError
        from ..settings import check_url

        found = fetch_json(self.issuer + "/.well-known/openid-configuration")
        if str(found.get("issuer", "")).rstrip("/") != self.issuer:
            raise BackendUnavailable(f"the OpenID configuration of {self.issuer} names another issuer")
        endpoints = {}
        for name in ("authorization_endpoint", "token_endpoint"):
            url = found.get(name)
            if not isinstance(url, str):
                raise BackendUnavailable(f"the OpenID configuration of {self.issuer} has no {name}")
            try:
                check_url(name, url)
            except UsageError as exc:
                raise BackendUnavailable(str(exc)) from None
            endpoints[name] = url
        if origin_of(endpoints["token_endpoint"]) != origin_of(self.issuer):
            raise BackendUnavailable(
                f"the token endpoint {endpoints['token_endpoint']} is not on the issuer's origin "
                f"{origin_of(self.issuer)}, the only one the UI's CSP lets it reach"
            )
        methods = found.get("code_challenge_methods_supported")
        if isinstance(methods, list) and "S256" not in methods:
            raise BackendUnavailable(f"the provider {self.issuer} does not support PKCE with S256")
        return {
            "issuer": self.issuer,
            "provider": urlsplit(self.issuer).netloc,
            "client_id": self.client_id,
            "scopes": self.scopes,
            **endpoints,
        }


def oauth_route(settings: Settings | None) -> Route:
    """GET /ui/oauth.json: how the app signs in with the provider; 404 when that is not set up."""
    info = ProviderInfo(settings) if settings and settings.oauth_issuer and settings.oauth_ui_client_id else None

    async def serve(request: Request) -> Response:
        from ..errors import BackendUnavailable

        headers = {"Cache-Control": "no-store"}
        if info is None:
            return JSONResponse({"error": "signing in with the provider is off (oauth_ui_client_id)"}, 404, headers)
        try:
            return JSONResponse(await info.get(), headers=headers)
        except BackendUnavailable as exc:
            return JSONResponse({"error": str(exc)}, 503, {**headers, "Retry-After": str(int(info.RETRY))})

    return Route("/ui/oauth.json", serve, methods=["GET"])


def page_csp(settings: Settings | None) -> str:
    """The CSP of /ui: connect-src adds the issuer's origin when the UI signs in with the provider."""
    if settings is not None and settings.oauth_issuer and settings.oauth_ui_client_id:
        return csp(origin_of(settings.oauth_issuer))
    return CSP


def _not_modified(request: Request, response: Response) -> bool:
    etag = response.headers.get("etag")
    if_none_match = request.headers.get("if-none-match")
    if etag and if_none_match:
        tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
        return "*" in tags or etag in tags
    return False


def _file(request: Request, path: Path, cache: str, policy: str = CSP) -> Response:
    try:
        info = path.stat()
    except OSError:
        return _not_found()
    if not stat.S_ISREG(info.st_mode):
        return _not_found()
    media = MEDIA_TYPES.get(path.suffix.lower(), "application/octet-stream")
    response: Response = FileResponse(path, media_type=media, stat_result=info, headers={"Cache-Control": cache})
    if _not_modified(request, response):
        keep = {k: v for k, v in response.headers.items() if k.lower() in ("etag", "cache-control", "last-modified")}
        response = Response(status_code=304, headers=keep)
    return _secured(response, policy)


def _inside(root: Path, relative: str) -> Path | None:
    """root/relative if it stays inside root (no '..', no absolute parts, no symlink escape)."""
    if "\x00" in relative or "\\" in relative:
        return None
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if any(p == ".." or p.startswith(".") for p in parts):
        return None
    candidate = root.joinpath(*parts).resolve() if parts else root
    try:
        candidate.relative_to(root)
    except ValueError:
        return None
    return candidate


def built_routes(root: Path, policy: str = CSP) -> list[BaseRoute]:
    """The routes serving the built app in `root`, its pages under the CSP `policy`."""
    index = root / "index.html"

    async def serve_index(request: Request) -> Response:
        return _file(request, index, REVALIDATE, policy)

    async def serve_path(request: Request) -> Response:
        relative = request.path_params.get("path", "")
        if relative in ("", "index.html"):
            return _file(request, index, REVALIDATE, policy)
        target = _inside(root, relative)
        if relative.startswith("assets/"):
            # Hashed bundles: immutable when present, 404 (never the HTML page) when not.
            return _file(request, target, IMMUTABLE) if target is not None else _not_found()
        if target is not None and target.is_file():
            return _file(request, target, REVALIDATE, policy)
        return _file(request, index, REVALIDATE, policy)  # the SPA fallback: the app routes on the client

    return [
        Route("/ui", serve_index, methods=["GET", "HEAD"]),
        Route("/ui/{path:path}", serve_path, methods=["GET", "HEAD"]),
    ]


def not_built_routes() -> list[BaseRoute]:
    async def not_built(request: Request) -> Response:
        return _not_found(NOT_BUILT)

    return [
        Route("/ui", not_built, methods=["GET", "HEAD"]),
        Route("/ui/{path:path}", not_built, methods=["GET", "HEAD"]),
    ]


def ui_routes(settings: Settings | None = None, environ: Mapping[str, str] | None = None) -> list[BaseRoute]:
    """The /ui routes of `toolrun serve` (called once at startup when `ui_enabled` is true)."""
    root = find_dist(environ)
    if root is None:
        tried = ", ".join(str(p) for p in dist_candidates(environ))
        log.warning(
            "ui_enabled is true but the UI was never built (no index.html in %s): /ui answers 404. "
            "Reinstall toolrun, or rebuild it with `make ui` in a checkout.",
            tried,
        )
        return not_built_routes()
    log.info("serving the browser UI at /ui from %s", root)
    return [oauth_route(settings), *built_routes(root, page_csp(settings))]
