"""HTTP errors, mapped once: a ToolrunError's status, body and headers.

JSON routes raise and the app's exception handler (`EXCEPTION_HANDLERS`) answers with `json_error`, as
the plain-ASGI handlers of GET /healthz, GET /tools/{key} and POST /mcp do themselves; POST /tools/{key},
served by the plain-ASGI `ToolCall`, writes `error_text` (or, asked for JSON,
`error_object`). Status codes come from the error classes themselves (`http_status`).
"""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import NotFound, OutputInvalid, RateLimited, SandboxUnavailable, ToolFailed, ToolrunError, Unauthorized

log = logging.getLogger("toolrun.server")


def public_summary(exc: SandboxUnavailable) -> str:
    """A SandboxUnavailable as a server's caller sees it (a short message); the whole of it, with the paths and
    bwrap's words, goes to the server's log."""
    log.warning("%s", exc.summary)
    return exc.public


def json_error(exc: ToolrunError) -> JSONResponse:
    if isinstance(exc, Unauthorized):
        body = {"error": "unauthorized"}
    elif isinstance(exc, NotFound):
        body = {"error": "not found"}
    elif isinstance(exc, SandboxUnavailable):
        body = {"error": public_summary(exc).split(": ", 1)[1]}
    else:
        body = {"error": str(exc)}
    return JSONResponse(body, status_code=exc.http_status, headers=retry_headers(exc))


def error_text(exc: ToolrunError, debug: bool) -> str:
    """`Type: message`, or the traceback when DEBUG is on (a SandboxUnavailable: its short form, always)."""
    if isinstance(exc, SandboxUnavailable):
        return public_summary(exc)
    if debug:
        original = exc.original if isinstance(exc, ToolFailed) else exc
        return exc.redact("".join(traceback.format_exception(original)))
    if isinstance(exc, OutputInvalid):  # the reason, then the text the tool printed
        return f"{exc.summary}\n\n{exc.output}"
    return exc.summary


def error_object(exc: ToolrunError, text: str) -> dict[str, Any]:
    """A POST /tools/{key} error asked for as JSON: `{error, type}` (the plain text's two halves)."""
    kind = type(exc.original).__name__ if isinstance(exc, ToolFailed) else type(exc).__name__
    if isinstance(exc, SandboxUnavailable):
        return {"error": text.split(": ", 1)[1], "type": kind}
    message = text if text != exc.summary else (str(exc.original) if isinstance(exc, ToolFailed) else str(exc))
    if isinstance(exc, OutputInvalid) and not text.startswith("Traceback"):
        message = str(exc)
    body: dict[str, Any] = {"error": message, "type": kind}
    if isinstance(exc, RateLimited):
        body["retry_after"] = exc.retry_after
    if isinstance(exc, OutputInvalid):  # the text the tool printed stays the caller's
        body["output"] = exc.output
    return body


def json_text(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)


def retry_headers(exc: ToolrunError) -> dict[str, str]:
    """Retry-After of a 429 or 503, and WWW-Authenticate of a 401 when OAuth is on."""
    if isinstance(exc, Unauthorized) and exc.challenge:
        return {"WWW-Authenticate": exc.challenge}
    if isinstance(exc, RateLimited):
        return {"Retry-After": str(exc.retry_after)}
    if exc.http_status == 503 and not isinstance(exc, SandboxUnavailable):  # that one is no passing state
        return {"Retry-After": "1"}
    return {}


async def _handle(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ToolrunError)
    return json_error(exc)


# Starlette's exception handlers for the JSON routes: any ToolrunError a route raises becomes its response.
EXCEPTION_HANDLERS: dict[Any, Any] = {ToolrunError: _handle}
