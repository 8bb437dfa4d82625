"""The handlers of the rows served as plain ASGI (`serve="plain"` in routes.py), and their table.

`POST /tools/{key}` (ToolCall, the hot route), `GET /tools/{key}` (ToolGet), `GET /healthz` (Healthz) and the /mcp
endpoint (McpRoad): no Request, router or Response. Each is built with its row's auth mode and applies it; the
dispatcher (dispatch.py) hands it requests directly (`handle`, which returns the status sent), or the router does
(`__call__`) when the `hot_routes` speedup is off. Their answers are written whole by `respond` (one write with the
`direct_answer` speedup, protocol.answer; else two `send` calls). PLAIN_HANDLERS is the table a row names its
handler from.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import formatting
from ..access.audit import clean_request_id
from ..errors import ToolFailed, ToolrunError, Unauthorized, UnsupportedMediaType
from ..exec import sandboxview
from ..models import CallOrigin, CallResult
from ..service import JobStarted
from .disconnect import unless_gone
from .httperrors import error_object, error_text, json_error, json_text, retry_headers
from .protocol import answer
from .request import head, identity_from_scope, is_json_media, parse_json_object, require_body

if TYPE_CHECKING:
    from ..access import Access, Mode
    from .parts import ServerParts

log = logging.getLogger("toolrun.server")

STATUS = "toolrun.status"  # scope key: the status of the answer sent (0 or absent: none yet)


@runtime_checkable
class PlainHandler(Protocol):
    """The handler of a plain row: an ASGI app that can also answer with the status it sent (`handle`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> int: ...


def recording(scope: Scope, send: Send) -> Send:
    """`send`, leaving the status of the answer in `scope[STATUS]` as it starts."""

    async def sent(message: Message) -> None:
        if message["type"] == "http.response.start":
            scope[STATUS] = message["status"]
        await send(message)

    return sent


class McpRoad:
    """The /mcp endpoint (mcp/endpoint.McpKeyGate) as a plain handler: a ToolrunError that escapes it gets the app's
    JSON answer, as on the router's road (the app's exception handler)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> int:
        send = recording(scope, send)
        try:
            await self.app(scope, receive, send)
        except ToolrunError as exc:
            if scope.get(STATUS):
                raise
            await json_error(exc)(scope, receive, send)
        return int(scope.get(STATUS, 0))


def _mcp(parts: ServerParts, mode: Mode) -> PlainHandler | None:
    return McpRoad(parts.mcp(mode)) if parts.mcp is not None else None


def path_key(scope: Scope) -> str:
    """The `{key}` of a /tools/{key} request: the router's path parameter, else the rest of the path."""
    params = scope.get("path_params")
    return params["key"] if params else scope["path"][len("/tools/") :]  # type: ignore[no-any-return]


def json_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    """The headers of a JSON answer of `body`."""
    return [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]


async def respond(scope: Scope, send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    """Send a whole answer: in one write where the protocol takes it (protocol.answer), else as two ASGI messages."""
    if not answer(scope, send, status, headers, body):
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


# GET /healthz: the bytes JSONResponse({"status": "ok"}) would send.
HEALTHZ_BODY = b'{"status":"ok"}'
HEALTHZ_HEADERS = json_headers(HEALTHZ_BODY)


class Healthz:
    """`GET /healthz`: liveness, answered from stored bytes (its row is `anonymous`: no key is read)."""

    def __init__(self, access: Access, mode: Mode) -> None:
        self.access = access
        self.auth = mode

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> int:
        if self.auth != "anonymous":
            try:
                await identity_from_scope(self.access, scope, self.auth)
            except ToolrunError as exc:
                response = json_error(exc)
                await response(scope, receive, send)
                return response.status_code
        await respond(scope, send, 200, HEALTHZ_HEADERS, HEALTHZ_BODY)
        return 200


class ToolGet:
    """`GET /tools/{key}`: one tool's entry, encoded once per loaded catalog (ToolService.describe_json)."""

    def __init__(self, parts: ServerParts, mode: Mode) -> None:
        self.service = parts.service
        self.access = parts.access
        self.auth = mode

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> int:
        try:
            identity = await identity_from_scope(self.access, scope, self.auth)
            body = self.service.describe_json(identity, path_key(scope))
        except ToolrunError as exc:
            response = json_error(exc)
            await response(scope, receive, send)
            return response.status_code
        await respond(scope, send, 200, json_headers(body), body)
        return 200


# On every 200 answer of an exec or curl tool: the process's exit code (0 success, -1 killed by the
# timeout, another negative number: killed by that signal). An fn tool runs no process: no header.
EXIT_CODE_HEADER = b"x-toolrun-exit-code"

Headers = list[tuple[bytes, bytes]]
JSON_MEDIA = b"application/json"
TEXT_MEDIA = b"text/plain; charset=utf-8"


class CallHead(NamedTuple):
    """What the answer of a call depends on in the request's head."""

    content_type: str
    length: bytes | None
    as_json: bool  # `Accept: application/json` without text/plain: the structured result and JSON errors
    request_id: str
    door: str
    prefer_async: bool


def read_head(scope: Scope) -> CallHead:
    given = head(scope)  # parsed once for every layer (request.py); the first of each header counts
    accept = given.get(b"accept")
    # A browser page of this server's own origin: the UI (docs/operations.md).
    ui = given.get(b"sec-fetch-site") == b"same-origin" or given.get(b"x-toolrun-client") == b"ui"
    # `Accept: application/json` (without text/plain) asks for the structured result and JSON
    # errors; every other client, browsers' */* included, gets the plain text of the spec.
    as_json = accept is not None and b"application/json" in accept and b"text/plain" not in accept
    return CallHead(
        given.text(b"content-type") or "",
        given.get(b"content-length"),
        as_json,
        clean_request_id(given.text(b"x-request-id")),
        "ui" if ui else "http",
        b"respond-async" in given.joined(b"prefer").lower(),  # RFC 7240: a job at once (docs/jobs.md)
    )


class ToolCall:
    """`POST /tools/{key}` as a plain ASGI app: the hot route, with no Request, Response or router.

    The dispatcher hands it its row's requests directly (`handle`); the router holds it too (`__call__`),
    for the `hot_routes` speedup off. The answer is plain text (the result, or `Type: message` from the
    error's status), unless the client sends `Accept: application/json` without text/plain: then
    the structured result, or `{error, type}`. A refused key is the JSON 401 of every route.
    An exec or curl tool's answer carries its exit code in `X-Toolrun-Exit-Code`, in either form.
    A call the service turns into a job is a 202 with `Location` (docs/jobs.md).
    """

    def __init__(self, parts: ServerParts, mode: Mode) -> None:
        self.service = parts.service
        self.access = parts.access
        self.auth = mode  # its row's mode (routes.py)
        self.debug = parts.settings.debug
        self.max_body = parts.settings.max_body_bytes
        self.body_timeout = parts.settings.request_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> int:
        """Answer the call; returns the status sent."""
        asked = read_head(scope)
        headers: Headers = [(b"x-request-id", asked.request_id.encode())]
        try:
            outcome = await self.start(scope, receive, asked)
        except ToolrunError as exc:
            status, text, media = self.refused(exc, asked.as_json, headers)
        except Exception as exc:
            log.exception("unexpected error calling %s", path_key(scope))
            status, text, media = self.refused(ToolFailed(exc), asked.as_json, headers)
        else:
            if isinstance(outcome, JobStarted):
                return await _accepted(scope, send, headers, outcome)
            status, text = 200, self.rendered(outcome, asked.as_json, headers)
            media = JSON_MEDIA if asked.as_json or outcome.typed else TEXT_MEDIA  # a typed output is JSON
        data = text.encode("utf-8", "replace")  # a lone surrogate from an fn tool becomes "?", not a 500
        headers += [(b"content-length", str(len(data)).encode()), (b"content-type", media)]
        await respond(scope, send, status, headers, data)
        return status

    async def start(self, scope: Scope, receive: Receive, asked: CallHead) -> CallResult | JobStarted:
        """The caller, the tool, the body, then the call (or the job it becomes: the service decides)."""
        key = path_key(scope)
        identity = await identity_from_scope(self.access, scope, self.auth)
        self.service.describe(identity, key)  # an unknown or hidden key is a 404 before the body is read
        body = await require_body(receive, asked.length, self.max_body, self.body_timeout)
        if (body or asked.content_type) and not is_json_media(asked.content_type):
            raise UnsupportedMediaType(asked.content_type.split(";", 1)[0].strip().lower())
        return await self.service.start_or_call(
            identity,
            key,
            parse_json_object(body),
            origin=CallOrigin(asked.door, asked.request_id),
            prefer_async=asked.prefer_async,
            as_json=asked.as_json,
            watch=partial(unless_gone, scope),  # cancelled (processes killed) if the client goes away
        )

    def rendered(self, result: CallResult, as_json: bool, headers: Headers) -> str:
        if result.exec is not None:  # exec and curl tools: the exit code, so no client parses a tuple
            headers.append((EXIT_CODE_HEADER, str(result.exec.returncode).encode()))
            if not result.ok:  # a failed sandboxed call: which profile it ran in, and what that withholds
                tool = self.service.spec(result.key)
                if tool is not None and tool.sandbox is not None:
                    headers.append((sandboxview.HEADER, sandboxview.header_value(tool.sandbox, tool.cwd)))
        if as_json:
            return json_text(formatting.call_payload(result))
        return formatting.answer_text(result)

    def refused(self, exc: ToolrunError, as_json: bool, headers: Headers) -> tuple[int, str, bytes]:
        """The status, text and media type of an error's answer (its Retry-After or WWW-Authenticate added)."""
        headers += [(k.lower().encode(), v.encode()) for k, v in retry_headers(exc).items()]
        if isinstance(exc, Unauthorized):  # the same JSON body as on every other route
            return exc.http_status, '{"error": "unauthorized"}', JSON_MEDIA
        text = error_text(exc, self.debug)
        if as_json:
            return exc.http_status, json_text(error_object(exc, text)), JSON_MEDIA
        return exc.http_status, text, TEXT_MEDIA


async def _accepted(scope: Scope, send: Send, headers: Headers, started: JobStarted) -> int:
    """202: the call is a job (approval, or run in the background); `Location` is where to follow it."""
    data = json_text({"job": started.id, "status": started.state}).encode()
    headers = [
        *headers,
        (b"location", f"/jobs/{started.id}".encode()),
        (b"content-length", str(len(data)).encode()),
        (b"content-type", b"application/json"),
    ]
    if started.asked:
        headers.append((b"preference-applied", b"respond-async"))
    await respond(scope, send, 202, headers, data)
    return 202


# The handlers a row may name besides `app.Routes` methods: plain ASGI, each built with its row's auth mode
# (None: the part is not mounted, and the row has no route).
PLAIN_HANDLERS: dict[str, Callable[[ServerParts, Mode], PlainHandler | None]] = {
    "tool_call": ToolCall,
    "get_tool": ToolGet,
    "healthz": lambda parts, mode: Healthz(parts.access, mode),
    "mcp": _mcp,
}
