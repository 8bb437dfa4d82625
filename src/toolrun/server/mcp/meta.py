"""What the MCP meta-tools declare besides their input: the shape of their structured content, and hints.

`execute`, `search`, `describe_tools` and `whoami` answer with text for the model and structured content for
programs; `OUTPUT_SCHEMAS` is that content's JSON Schema, which clients check results against (an error result,
`isError: true`, carries `{error, message}` instead, which the schema allows too). `search`, `describe_tools`
and `whoami` change nothing: `readOnlyHint`. `execute` runs whatever tool it is given: no hint but an open world.

Direct mode (`mcp_direct`) lists every catalog tool the caller may see after the four, in key order, in pages
of `LIST_PAGE` tools: a page's `nextCursor` is the position of the next one, and an unknown cursor is refused.
2026-07-28 clients may keep a list `LIST_TTL_MS` milliseconds, per caller (`cacheScope: private`: what a list
holds depends on who asks); a reload tells them to list again.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

LIST_PAGE = 100  # tools per tools/list page in direct mode
LIST_TTL_MS = 30_000

_STRINGS = {"type": "array", "items": {"type": "string"}}

OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "execute": {
        "type": "object",
        "properties": {
            "key": {"type": "string"},
            "ok": {"type": "boolean"},
            "result": {"description": "An fn tool's return value, or a typed `output:` parsed."},
            "returncode": {"type": "integer"},
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "timed_out": {"type": "boolean"},
            "truncated": {"type": "boolean"},
            "bytes_kept": {"type": "integer"},
            "bytes_dropped": {"type": "integer"},
        },
        "required": ["key", "ok"],
    },
    "search": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "key": {"type": "string"},
                        "groups": _STRINGS,
                        "summary": {"type": "string"},
                        "example": {"type": "string"},
                        "score": {"type": "number", "minimum": 0, "maximum": 1},
                    },
                    "required": ["key", "groups", "summary", "example"],
                },
            },
            "total": {"type": "integer"},
            "offset": {"type": "integer"},
            "has_more": {"type": "boolean"},
            "next_offset": {"type": ["integer", "null"]},
        },
        "required": ["query", "items", "total", "offset", "has_more", "next_offset"],
    },
    "describe_tools": {
        "type": "object",
        "properties": {
            "tools": {"type": "array", "items": {"type": "object", "description": "A tool entry (GET /tools/{key})."}},
            "not_found": _STRINGS,
        },
        "required": ["tools", "not_found"],
    },
    "whoami": {
        "type": "object",
        "properties": {
            "username": {"type": ["string", "null"]},
            "email": {"type": ["string", "null"]},
            "groups": _STRINGS,
            "tools": _STRINGS,
        },
        "required": ["username", "email", "groups", "tools"],
    },
}


def _or_error(name: str, schema: dict[str, Any]) -> None:
    """Clients check every result against the schema, error results too (the MCP Inspector does): a result is
    the tool's own shape, or an error result's `{error, message}`, or (execute) a job to follow `{job, status}`."""
    shapes = [{"required": schema.pop("required")}, {"required": ["error", "message"]}]
    schema["properties"] |= {"error": {"type": ["string", "null"]}, "message": {"type": "string"}}
    if name == "execute":
        shapes.append({"required": ["job", "status"]})
        schema["properties"] |= {
            "job": {"type": "string"},
            "status": {"type": "string"},
            "location": {"type": "string"},
        }
    schema["anyOf"] = shapes


for _name, _schema in OUTPUT_SCHEMAS.items():
    _or_error(_name, _schema)

ANNOTATIONS: dict[str, types.ToolAnnotations] = {
    "execute": types.ToolAnnotations(read_only_hint=False, open_world_hint=True),
    "search": types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "describe_tools": types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "whoami": types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
}


def page_start(cursor: str | None, total: int) -> int:
    """The position a tools/list cursor names (ValueError naming what is wrong with it)."""
    if not cursor:
        return 0
    if not cursor.isdigit() or int(cursor) > total or int(cursor) % LIST_PAGE:
        raise ValueError(f"invalid cursor {cursor[:40]!r}: pass the nextCursor of the previous tools/list page")
    return int(cursor)
