"""Plain-ASGI handlers of the rows that spawn nothing: `GET /healthz` and `GET /tools/{key}`.

No Request, router or Response: each answer is stored bytes, written by `respond` (one write with the
`direct_answer` speedup, protocol.answer; else two `send` calls). Like every
handler of a `serve="plain"` row (dispatch.PLAIN_HANDLERS), each is built with its row's auth mode and
applies it; the dispatcher hands it requests directly (`handle`, which returns the status sent), or the
router does (`__call__`) when the `hot_routes` speedup is off. (`POST /tools/{key}` is toolcall.ToolCall.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.types import Receive, Scope, Send

from ..errors import ToolrunError
from .httperrors import json_error
from .protocol import answer
from .request import identity_from_scope

if TYPE_CHECKING:
    from ..access import Access, Mode
    from .parts import ServerParts


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
