"""MCP over stdio: every line read is first held to the JSON rule of every door.

The MCP SDK parses each stdin line itself and, like most JSON parsers, keeps the last of duplicate
keys and accepts NaN/Infinity. POST /tools and /mcp refuse both, so stdio does too: each line is
checked with `parse_json_value` before the SDK sees it. A refused line never reaches the SDK; its
sender gets a JSON-RPC error naming what was wrong (-32600 with the request's id when the line is
JSON that names one, else -32700 with a null id, as JSON-RPC asks for a parse error).
"""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

from ..errors import ToolrunError
from .request import parse_json_value

log = logging.getLogger("toolrun.mcp")


def claim_stdin() -> io.TextIOWrapper:
    """The protocol's stdin on a private descriptor; fd 0 then reads the null device (as the SDK does).

    A tool or a stray read in a handler therefore sees EOF and can never take the client's bytes."""
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    return io.TextIOWrapper(os.fdopen(private, "rb", closefd=False), encoding="utf-8", errors="replace")


def _request_id(line: str) -> str | int | None:
    """The id of a request whose JSON is well formed but breaks the rule (lenient parse), else None."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if isinstance(data, dict) and "method" in data:
        rid = data.get("id")
        if isinstance(rid, (str, int)) and not isinstance(rid, bool):
            return rid
    return None


class StrictLines:
    """stdin lines for the SDK's reader, with the lines that break the JSON rule answered and dropped.

    `send` (set once the SDK's write stream exists) writes a raw JSON-RPC message to stdout through
    the SDK's own writer, so answers never interleave."""

    def __init__(self, lines: Any) -> None:
        self.lines = lines
        self.send: Any = None

    def __aiter__(self) -> AsyncIterator[str]:
        return self._checked()

    async def _checked(self) -> AsyncIterator[str]:
        async for line in self.lines:
            if not line.strip():
                yield line  # the SDK's own handling (it logs and goes on)
                continue
            try:
                parse_json_value(line.encode("utf-8"))
            except ToolrunError as exc:
                await self._refuse(line, str(exc))
                continue
            yield line

    async def _refuse(self, line: str, reason: str) -> None:
        rid = _request_id(line)
        log.warning("stdio: refused a message: %s", reason)
        if self.send is None:
            return
        code, prefix = (-32600, "Invalid Request") if rid is not None else (-32700, "Parse error")
        await self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": f"{prefix}: {reason}"}})
