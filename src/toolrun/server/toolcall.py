"""`POST /tools/{key}`: the hot route, as a plain ASGI app."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.types import Receive, Scope, Send

from .. import formatting
from ..audit import CallOrigin, clean_request_id
from ..errors import (
    ToolFailed,
    ToolrunError,
    Unauthorized,
    UnsupportedMediaType,
)
from . import routes
from .disconnect import unless_gone
from .errors import _error_object, _error_text, _json_text, _retry_headers
from .request import head, identity_from_scope, is_json_media, parse_json_object, require_body

if TYPE_CHECKING:
    from .app import Backends

log = logging.getLogger("toolrun.server")

# On every 200 answer of an exec or curl tool: the process's exit code (0 success, -1 killed by the
# timeout, another negative number: killed by that signal). An fn tool runs no process: no header.
EXIT_CODE_HEADER = b"x-toolrun-exit-code"


class ToolCall:
    """`POST /tools/{key}` as a plain ASGI app: the hot route, with no Request, Response or router.

    `Guard` hands it every POST under /tools/ directly; the router holds it too (for an app
    built without the guard). The answer is plain text (the result, or `Type: message` from the
    error's status), unless the client sends `Accept: application/json` without text/plain: then
    the structured result, or `{error, type}`. A refused key is the JSON 401 of every route.
    An exec or curl tool's answer carries its exit code in `X-Toolrun-Exit-Code`, in either form.
    """

    def __init__(self, backends: Backends) -> None:
        self.service = backends.service
        self.access = backends.access
        self.auth = routes.auth_of("/tools/{key}", "POST")  # its row's mode, as on the router's road
        self.debug = backends.settings.debug
        self.max_body = backends.settings.max_body_bytes
        self.body_timeout = backends.settings.request_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> int:
        """Answer the call; returns the status sent."""
        key = scope["path"][len("/tools/") :]
        given = head(scope)  # parsed once for every layer (request.py); the first of each header counts
        content_type = given.text(b"content-type") or ""
        length, accept = given.get(b"content-length"), given.get(b"accept")
        request_id = given.text(b"x-request-id")
        # A browser page of this server's own origin: the UI (docs/operations.md).
        ui = given.get(b"sec-fetch-site") == b"same-origin" or given.get(b"x-toolrun-client") == b"ui"
        door = "ui" if ui else "http"
        prefer_async = b"respond-async" in given.joined(b"prefer").lower()  # RFC 7240: a job at once (docs/jobs.md)
        request_id = clean_request_id(request_id)
        # `Accept: application/json` (without text/plain) asks for the structured result and JSON
        # errors; every other client, browsers' */* included, gets the plain text of the spec.
        as_json = accept is not None and b"application/json" in accept and b"text/plain" not in accept
        headers: list[tuple[bytes, bytes]] = [(b"x-request-id", request_id.encode())]
        media = b"text/plain; charset=utf-8"
        try:
            identity = await identity_from_scope(self.access, scope, self.auth)
            tool = self.service.describe(identity, key)
            body = await require_body(receive, length, self.max_body, self.body_timeout)
            if (body or content_type) and not is_json_media(content_type):
                raise UnsupportedMediaType(content_type.split(";", 1)[0].strip().lower())
            args = parse_json_object(body)
            if self.service.jobs.wanted(tool, prefer_async):
                job = await self.service.jobs.submit(
                    identity, key, args, origin=CallOrigin(door, request_id), as_json=as_json
                )
                return await _accepted(send, headers, job["id"], job["state"], prefer_async)
            call = self.service.call(identity, key, args, origin=CallOrigin(door, request_id))
            result = await unless_gone(scope, call)  # cancelled (processes killed) if the client goes away
            if result.exec is not None:  # exec and curl tools: the exit code, so no client parses a tuple
                headers.append((EXIT_CODE_HEADER, str(result.exec.returncode).encode()))
            if as_json:
                status, text = 200, _json_text(formatting.call_payload(result))
            else:
                status, text = 200, formatting.result_text(result.value)
        except Unauthorized as exc:  # the same JSON body as on every other route
            status, text, media = exc.http_status, '{"error": "unauthorized"}', b"application/json"
            headers += [(k.lower().encode(), v.encode()) for k, v in _retry_headers(exc).items()]
        except ToolrunError as exc:
            status, text = exc.http_status, _error_text(exc, self.debug)
            headers += [(k.lower().encode(), v.encode()) for k, v in _retry_headers(exc).items()]
            if as_json:
                text = _json_text(_error_object(exc, text))
        except Exception as exc:
            log.exception("unexpected error calling %s", key)
            failed = ToolFailed(exc)
            status, text = failed.http_status, _error_text(failed, self.debug)
            if as_json:
                text = _json_text(_error_object(failed, text))
        data = text.encode("utf-8", "replace")  # a lone surrogate from an fn tool becomes "?", not a 500
        if as_json:
            media = b"application/json"
        headers += [(b"content-length", str(len(data)).encode()), (b"content-type", media)]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})
        return status


async def _accepted(send: Send, headers: list[tuple[bytes, bytes]], job_id: str, state: str, preferred: bool) -> int:
    """202: the call is a job (approval, or run in the background); `Location` is where to follow it."""
    data = _json_text({"job": job_id, "status": state}).encode()
    headers = [
        *headers,
        (b"location", f"/jobs/{job_id}".encode()),
        (b"content-length", str(len(data)).encode()),
        (b"content-type", b"application/json"),
    ]
    if preferred:
        headers.append((b"preference-applied", b"respond-async"))
    await send({"type": "http.response.start", "status": 202, "headers": headers})
    await send({"type": "http.response.body", "body": data})
    return 202
