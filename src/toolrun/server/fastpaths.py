"""The guard's fast paths for routes that spawn nothing: `GET /tools/{key}` as plain ASGI.

(`POST /tools/{key}` is `app.ToolCall`; `GET /healthz` is answered by the guard from stored bytes.)
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Receive, Scope, Send

from ..errors import ToolrunError
from .app import Backends, identity_from_scope, json_error


class ToolGet:
    """`GET /tools/{key}` as a plain ASGI handler (the guard's fast path): no Request, router or Response.

    Each tool's entry is encoded once (per loaded tool object) and served as stored bytes."""

    def __init__(self, backends: Backends) -> None:
        self.service = backends.service
        self.access = backends.access
        self._bodies: dict[str, tuple[Any, bytes]] = {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> int:
        try:
            identity = await identity_from_scope(self.access, scope, "optional")
            tool = self.service.describe(identity, scope["path"][len("/tools/") :])
        except ToolrunError as exc:
            response = json_error(exc)
            await response(scope, receive, send)
            return response.status_code
        cached = self._bodies.get(tool.key)
        if cached is None or cached[0] is not tool:  # a reloaded catalog brings new tool objects
            body = json.dumps(tool.entry(), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
            cached = self._bodies[tool.key] = (tool, body)
        body = cached[1]
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})
        return 200
