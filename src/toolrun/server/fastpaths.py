"""The guard's fast paths for routes that spawn nothing: `GET /tools/{key}` as plain ASGI.

(`POST /tools/{key}` is `app.ToolCall`; `GET /healthz` is answered by the guard from stored bytes.)
"""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from ..errors import ToolrunError
from .app import Backends, identity_from_scope, json_error
from .routes import auth_of


class ToolGet:
    """`GET /tools/{key}` as a plain ASGI handler (the guard's fast path): no Request, router or Response.

    Each tool's entry is encoded once per loaded catalog (ToolService.describe_json) and served as stored bytes."""

    def __init__(self, backends: Backends) -> None:
        self.service = backends.service
        self.access = backends.access
        self.auth = auth_of("/tools/{key}", "GET")  # its row's mode, as on the router's road

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> int:
        try:
            identity = await identity_from_scope(self.access, scope, self.auth)
            body = self.service.describe_json(identity, scope["path"][len("/tools/") :])
        except ToolrunError as exc:
            response = json_error(exc)
            await response(scope, receive, send)
            return response.status_code
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})
        return 200
