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
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

if TYPE_CHECKING:
    from ..settings import Settings

log = logging.getLogger("toolrun.ui")

ENV_VAR = "TOOLRUN_UI_DIST"

CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ]
)

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


def _secured(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    return response


def _not_found(text: str = "Not Found") -> Response:
    return _secured(PlainTextResponse(text, status_code=404, headers={"Cache-Control": REVALIDATE}))


def _not_modified(request: Request, response: Response) -> bool:
    etag = response.headers.get("etag")
    if_none_match = request.headers.get("if-none-match")
    if etag and if_none_match:
        tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
        return "*" in tags or etag in tags
    return False


def _file(request: Request, path: Path, cache: str) -> Response:
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
    return _secured(response)


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


def built_routes(root: Path) -> list[BaseRoute]:
    """The routes serving the built app in `root`."""
    index = root / "index.html"

    async def serve_index(request: Request) -> Response:
        return _file(request, index, REVALIDATE)

    async def serve_path(request: Request) -> Response:
        relative = request.path_params.get("path", "")
        if relative in ("", "index.html"):
            return _file(request, index, REVALIDATE)
        target = _inside(root, relative)
        if relative.startswith("assets/"):
            # Hashed bundles: immutable when present, 404 (never the HTML page) when not.
            return _file(request, target, IMMUTABLE) if target is not None else _not_found()
        if target is not None and target.is_file():
            return _file(request, target, REVALIDATE)
        return _file(request, index, REVALIDATE)  # the SPA fallback: the app routes on the client

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
    return built_routes(root)
