"""The OpenAPI 3.1 document of the plain HTTP routes (served at /openapi.json).

Besides the generic `/tools/{key}`, the document has one path per tool the caller may see,
`/tools/<key>`, whose POST request body is that tool's own JSON Schema (types, required params,
`enum`, `pattern`, bounds; the same schema MCP clients get) and whose `x-toolrun-annotations`
carries the tool's behaviour hints. An anonymous caller's document names public tools only.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ..models import ToolSpec
from ..paramtypes import request_schema

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string"}},
}
_STATUS = {
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"type": "string", "enum": ["ok", "degraded"]}},
}
_PARAM = {
    "type": "object",
    "required": ["name", "type", "required", "default", "description", "example"],
    "properties": {
        "name": {"type": "string"},
        "type": {"type": "string", "enum": ["str", "int", "float", "bool", "list", "dict"]},
        "required": {"type": "boolean"},
        "default": {},
        "description": {"type": "string"},
        "example": {},
        "enum": {"type": "array", "description": "The only values accepted (when declared)."},
        "pattern": {"type": "string", "description": "Regular expression the whole value must match."},
        "min": {"type": "number", "description": "Smallest value (int, float) or length (str, list, dict)."},
        "max": {"type": "number", "description": "Largest value (int, float) or length (str, list, dict)."},
        "secret": {"type": "boolean", "description": "The value is a secret: never logged or shown back."},
    },
}
_ANNOTATIONS = {
    "type": "object",
    "description": "The behaviour hints the catalog declares (only those).",
    "properties": {
        "title": {"type": "string"},
        "read_only": {"type": "boolean"},
        "destructive": {"type": "boolean"},
        "idempotent": {"type": "boolean"},
        "open_world": {"type": "boolean"},
    },
    "additionalProperties": False,
}
_TOOL = {
    "type": "object",
    "required": ["key", "groups", "params", "return_type", "description", "example"],
    "properties": {
        "key": {"type": "string"},
        "groups": {"type": "array", "items": {"type": "string"}},
        "params": {"type": "array", "items": {"$ref": "#/components/schemas/Param"}},
        "return_type": {"type": "string"},
        "description": {"type": "string"},
        "example": {"type": "string"},
        "annotations": {"$ref": "#/components/schemas/Annotations"},
        "keywords": {"type": "array", "items": {"type": "string"}},
    },
}
_IDENTITY = {
    "type": "object",
    "required": ["username", "email", "groups", "tools"],
    "properties": {
        "username": {"type": "string"},
        "email": {"type": "string"},
        "groups": {"type": "array", "items": {"type": "string"}},
        "tools": {"type": "array", "items": {"type": "string"}},
    },
}
_USER = {
    "type": "object",
    "required": ["username", "email", "groups"],
    "properties": {
        "username": {"type": "string"},
        "email": {"type": "string"},
        "groups": {"type": "array", "items": {"type": "string"}},
        "key": {
            "type": ["object", "null"],
            "required": ["prefix", "created_at", "expires_at"],
            "properties": {
                "prefix": {"type": "string"},
                "created_at": {"type": "string"},
                "expires_at": {"type": ["string", "null"]},
            },
        },
    },
}
_PAGE = {
    "type": "object",
    "required": ["query", "items", "total", "offset", "limit", "has_more", "next_offset"],
    "properties": {
        "query": {"type": "string"},
        "items": {"type": "array", "items": {"$ref": "#/components/schemas/Tool"}},
        "total": {"type": "integer", "minimum": 0},
        "offset": {"type": "integer", "minimum": 0},
        "limit": {"type": "integer", "minimum": 1},
        "has_more": {"type": "boolean"},
        "next_offset": {"type": ["integer", "null"]},
    },
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _text(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}}


_ERR = {"$ref": "#/components/schemas/Error"}
# POST /tools/{key} with `Accept: application/json`: the structured result, and errors as {error, type}.
_CALL_RESULT = {
    "type": "object",
    "required": ["key", "ok", "seconds"],
    "properties": {
        "key": {"type": "string"},
        "ok": {"type": "boolean"},
        "returncode": {"type": "integer"},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "timed_out": {"type": "boolean"},
        "truncated": {"type": "boolean"},
        "result": {},
        "text": {"type": "string"},
        "seconds": {"type": "number"},
    },
}


def _text_or_json(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plain text by default; JSON to a client that sends `Accept: application/json`."""
    answer = _text(description)
    answer["content"]["application/json"] = {"schema": schema or _ERR}
    return answer


_UNAUTH = _json(_ERR, "Key missing, invalid or expired")
_BAD = _json(_ERR, "Bad query parameter")
# A tool key is `<group>.<name>` (the catalog's GROUP_PATTERN and NAME_PATTERN); anything else is a 404.
_KEY_PARAM = {
    "name": "key",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.[A-Za-z_][A-Za-z0-9_-]*$"},
}
_OPTIONAL: list[dict[str, list[str]]] = [{}, {"ApiKeyHeader": []}, {"Bearer": []}, {"ApiKeyQuery": []}]
_REQUIRED: list[dict[str, list[str]]] = [{"ApiKeyHeader": []}, {"Bearer": []}, {"ApiKeyQuery": []}]


def document(tools: Sequence[ToolSpec] = ()) -> dict[str, Any]:
    """The document; `tools` (the caller's) each get a path with their own request schema."""
    doc = _document()
    post = doc["paths"]["/tools/{key}"]["post"]
    for tool in tools:
        name = f"{tool.key}.arguments"
        doc["components"]["schemas"][name] = request_schema(tool)
        operation = copy.deepcopy(post)
        operation["summary"] = f"Call {tool.key}" + (f": {tool.summary}" if tool.summary else "")
        operation["operationId"] = f"call.{tool.key}"
        operation["requestBody"] = {
            "required": any(p.required for p in tool.params),
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
        }
        if tool.annotations:
            operation["x-toolrun-annotations"] = dict(tool.annotations)
        doc["paths"][f"/tools/{tool.key}"] = {"post": operation}
    return doc


def _document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "toolrun", "version": __version__, "description": "Tool catalog service: HTTP routes."},
        "components": {
            "schemas": {
                "Error": _ERROR,
                "Status": _STATUS,
                "Param": _PARAM,
                "Annotations": _ANNOTATIONS,
                "Tool": _TOOL,
                "Identity": _IDENTITY,
                "User": _USER,
                "SearchPage": _PAGE,
            },
            "securitySchemes": {
                "ApiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "Bearer": {"type": "http", "scheme": "bearer"},
                "ApiKeyQuery": {"type": "apiKey", "in": "query", "name": "api-key"},
            },
        },
        "paths": {
            "/healthz": {
                "get": {
                    "summary": "Liveness",
                    "security": [],
                    "responses": {"200": _json({"$ref": "#/components/schemas/Status"}, "Alive")},
                }
            },
            "/readyz": {
                "get": {
                    "summary": "Readiness: search index, cache backend, tool loader",
                    "security": [],
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Status"}, "Every check passed"),
                        "503": _json({"$ref": "#/components/schemas/Status"}, "A check failed"),
                    },
                }
            },
            "/whoami": {
                "get": {
                    "summary": "The caller's identity; for admins, why a user may (not) see and call a tool",
                    "security": _REQUIRED,
                    "parameters": [
                        {
                            "name": "explain",
                            "in": "query",
                            "required": False,
                            "description": "Admins: a tool key; the answer gains `explain` (groups against tags, "
                            "public, keys, rate-limit bucket).",
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "user",
                            "in": "query",
                            "required": False,
                            "description": "Admins, with explain: the user to explain for (default: the caller).",
                            "schema": {"type": "string"},
                        },
                    ],
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Identity"}, "Identity record"),
                        "400": _BAD,
                        "401": _UNAUTH,
                    },
                }
            },
            "/tools": {
                "get": {
                    "summary": "Tools the caller can access, sorted by key",
                    "security": _OPTIONAL,
                    "parameters": [
                        {
                            "name": "format",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "string", "enum": ["json", "md", "html"], "default": "json"},
                        },
                        {
                            "name": "offset",
                            "in": "query",
                            "required": False,
                            "description": "With offset or limit, one page; its position is in the X-* headers.",
                            "schema": {"type": "integer", "minimum": 0, "maximum": 1000000},
                        },
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "integer", "minimum": 1, "maximum": 100},
                        },
                    ],
                    "responses": {
                        "200": {
                            "description": "The tools (one page when offset or limit is given)",
                            "headers": {
                                "X-Total-Count": {"schema": {"type": "string"}},
                                "X-Has-More": {"schema": {"type": "string", "enum": ["true", "false"]}},
                                "X-Next-Offset": {"schema": {"type": "string"}},
                            },
                            "content": {
                                "application/json": {
                                    "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Tool"}}
                                },
                                "text/markdown": {"schema": {"type": "string"}},
                                "text/html": {"schema": {"type": "string"}},
                            },
                        },
                        "400": _BAD,
                    },
                }
            },
            "/tools/{key}": {
                "parameters": [_KEY_PARAM],
                "get": {
                    "summary": "One tool entry",
                    "security": _OPTIONAL,
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Tool"}, "The tool"),
                        "400": _BAD,
                        "404": _json(_ERR, "Unknown or inaccessible key"),
                    },
                },
                "post": {
                    "summary": "Call a tool; the result as text, or as JSON to `Accept: application/json`",
                    "security": _OPTIONAL,
                    "requestBody": {
                        "required": False,
                        "content": {
                            "application/json": {
                                "schema": {"type": "object", "additionalProperties": True},
                            }
                        },
                    },
                    "responses": {
                        "200": _text_or_json(
                            "The result coerced to text (exec failures are normal tuple results)", _CALL_RESULT
                        ),
                        "400": _text_or_json("Malformed JSON, not an object, or a parameter error"),
                        "403": _text_or_json("Cross-origin request not allowed"),
                        "404": _text_or_json("Unknown or inaccessible key"),
                        "408": _text_or_json("Body not received in time"),
                        "413": _text_or_json("Body too large"),
                        "415": _text_or_json("Content-Type is not application/json"),
                        "429": _text_or_json("Rate limited; Retry-After gives the seconds"),
                        "500": _text_or_json("The tool raised"),
                        "503": _text_or_json("Too many calls running"),
                    },
                },
            },
            "/users": {
                "get": {
                    "summary": "All users (admin)",
                    "security": _REQUIRED,
                    "parameters": [
                        {
                            "name": "keys",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "string", "enum": ["true", "false"]},
                        }
                    ],
                    "responses": {
                        "200": _json({"type": "array", "items": {"$ref": "#/components/schemas/User"}}, "Users"),
                        "400": _BAD,
                        "401": _UNAUTH,
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus text exposition",
                    "security": [],
                    "responses": {
                        "200": {"description": "Metrics", "content": {"text/plain": {"schema": {"type": "string"}}}}
                    },
                }
            },
            "/search": {
                "get": {
                    "summary": "Ranked, paginated search over the caller's tools",
                    "security": _OPTIONAL,
                    "parameters": [
                        {"name": "q", "in": "query", "required": False, "schema": {"type": "string", "maxLength": 500}},
                        {
                            "name": "offset",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "integer", "minimum": 0, "maximum": 1000000, "default": 0},
                        },
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                        },
                    ],
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/SearchPage"}, "A page of results"),
                        "400": _BAD,
                    },
                }
            },
        },
    }
