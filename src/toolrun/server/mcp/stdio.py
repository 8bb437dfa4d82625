"""MCP over stdio: every line read is first held to the JSON rule of every door, and answered.

The MCP SDK parses each stdin line itself and, like most JSON parsers, keeps the last of duplicate
keys and accepts NaN/Infinity. POST /tools and /mcp refuse both, so stdio does too: each line is
checked with `parse_json_value` before the SDK sees it. A refused line never reaches the SDK; its
sender gets a JSON-RPC error naming what was wrong (-32600 with the request's id when the line is
JSON that names one, else -32700 with a null id, as JSON-RPC asks for a parse error).

The SDK's reader also drops, without an answer, what its own parser refuses (a batch array, an
object that is no JSON-RPC message) and reads a request whose `id` is an object or a float as a
notification: its client would wait forever. `check_line` answers those too (-32600), so every line
but a notification gets an answer; and no line, however deep its nesting, can end the server.
"""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import mcp_types

from ...errors import ToolrunError
from ..request import parse_json_value

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
    except (ValueError, RecursionError):  # 1,000 `[` nest past the parser's depth
        return None
    return _usable_id(data)


def _usable_id(data: Any) -> str | int | None:
    """The id of a request object when it is one JSON-RPC allows here (a string or an integer), else None."""
    if isinstance(data, dict) and "method" in data:
        rid = data.get("id")
        if isinstance(rid, (str, int)) and not isinstance(rid, bool):
            return rid
    return None


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a number that is not an integer"
    return {dict: "an object", list: "an array", str: "a string", type(None): "null"}.get(type(value), "a number")


Refusal = tuple[int, "str | int | None", str]  # JSON-RPC error code, the id to answer, what was wrong

BATCH = "batch arrays are not supported: send one message per line"
NOT_JSON_RPC = (
    'not a JSON-RPC 2.0 message (a request has `jsonrpc` "2.0", a `method` and an `id`; a notification no `id`)'
)


def check_line(line: str) -> list[Refusal]:
    """What is wrong with one stdin line, as the answers it gets; [] when the SDK reads it as a message.

    Every line that is not a notification is answered: malformed JSON or JSON that breaks the rule
    (-32700, or -32600 with the request's id), a batch array (-32600 for each request in it, or once),
    anything but an object, an object the SDK's own parser refuses, and a request whose `id` is not a
    string or an integer (-32600 with a null id: the SDK would take it for a notification and drop it)."""
    try:
        data = parse_json_value(line.encode("utf-8"))
    except ToolrunError as exc:
        rid = _request_id(line)
        return [(-32600 if rid is not None else -32700, rid, str(exc))]
    if isinstance(data, list):
        ids = [rid for rid in map(_usable_id, data) if rid is not None]
        return [(-32600, rid, BATCH) for rid in ids] or [(-32600, None, BATCH)]
    if not isinstance(data, dict):
        return [(-32600, None, f"a message is a JSON object, not {_kind(data)}")]
    rid = _usable_id(data)
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:  # pydantic's ValidationError: what the SDK's reader would drop without an answer
        return [(-32600, rid, NOT_JSON_RPC)]
    if "id" in data and isinstance(message, mcp_types.JSONRPCNotification):
        return [(-32600, None, f"the id must be a string or an integer, not {_kind(data['id'])}")]
    return []


class StrictLines:
    """stdin lines for the SDK's reader, with the lines it could not answer answered here and dropped.

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
                continue  # blank lines between messages: nothing to answer
            try:
                refusals = check_line(line)
            except Exception:  # a bug here must not end the server: answer, log, go on
                log.exception("stdio: could not check a message")
                refusals = [(-32603, None, "the server could not read this message")]
            if not refusals:
                yield line
                continue
            for code, rid, reason in refusals:
                await self._refuse(code, rid, reason)

    async def _refuse(self, code: int, rid: str | int | None, reason: str) -> None:
        log.warning("stdio: refused a message: %s", reason)
        if self.send is None:
            return
        prefix = {-32700: "Parse error", -32600: "Invalid Request"}.get(code, "Internal error")
        await self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": f"{prefix}: {reason}"}})
