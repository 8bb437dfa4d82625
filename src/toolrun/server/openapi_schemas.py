"""The OpenAPI vocabulary the route table (routes.py) and the document (openapi.py) share: the component
schemas, and the fragments of operations the rows are written with (answers, parameters)."""

from __future__ import annotations

from typing import Any

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
        "output": {
            "type": "object",
            "description": "An exec or curl tool's typed output: `json` (with its JSON Schema) or `lines`.",
            "required": ["format"],
            "properties": {"format": {"type": "string", "enum": ["json", "lines"]}, "schema": {"type": "object"}},
        },
        "sandbox": {
            "type": "object",
            "description": "The sandbox the tool runs in (when it has one), and whether this host can enforce it.",
            "required": ["profile", "network", "readable", "writable", "enforced"],
            "properties": {
                "profile": {"type": "string"},
                "network": {"type": "string", "enum": ["none", "host"]},
                "readable": {"type": "array", "items": {"type": "string"}},
                "writable": {"type": "array", "items": {"type": "string"}},
                "tmp_size": {"type": "integer"},
                "enforced": {"type": "boolean"},
                "reason": {"type": "string", "description": "Why it cannot be enforced here (calls fail)."},
            },
        },
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
        "keys": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["prefix", "created_at", "expires_at", "revoked_at", "state"],
                "properties": {
                    "prefix": {"type": "string"},
                    "created_at": {"type": "string"},
                    "expires_at": {"type": ["string", "null"]},
                    "revoked_at": {"type": ["string", "null"]},
                    "state": {"type": "string", "enum": ["active", "expired", "revoked"]},
                },
            },
        },
    },
}
_RELOAD = {
    "type": "object",
    "required": ["status", "tools", "seconds"],
    "properties": {
        "status": {"type": "string", "enum": ["ok", "error"]},
        "tools": {"type": "integer"},
        "seconds": {"type": "number"},
        "problems": {"type": "array", "items": {"type": "string"}},
    },
}
_HIT = {
    "allOf": [{"$ref": "#/components/schemas/Tool"}],
    "properties": {
        "score": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "How well the tool matches the query, 0 to 1 (docs/mcp.md; absent for a blank query).",
        },
        "explain": {
            "type": "object",
            "description": "With explain=1: the words matched and how, the semantic similarity, the scores.",
        },
    },
}
_PAGE = {
    "type": "object",
    "required": ["query", "items", "total", "offset", "limit", "has_more", "next_offset"],
    "properties": {
        "query": {"type": "string"},
        "items": {"type": "array", "items": _HIT},
        "min_score": {"type": "number", "description": "The floor applied: hits scoring less are left out."},
        "total": {"type": "integer", "minimum": 0, "description": "How many tools score min_score or more."},
        "offset": {"type": "integer", "minimum": 0},
        "limit": {"type": "integer", "minimum": 1},
        "has_more": {"type": "boolean"},
        "next_offset": {"type": ["integer", "null"]},
    },
}


def json_response(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def text_response(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}}


ERR = {"$ref": "#/components/schemas/Error"}
# GET /.well-known/oauth-protected-resource: where clients find the authorization server (docs/oauth.md).
_RESOURCE = {
    "type": "object",
    "required": ["resource", "authorization_servers"],
    "properties": {
        "resource": {"type": "string"},
        "authorization_servers": {"type": "array", "items": {"type": "string"}},
        "bearer_methods_supported": {"type": "array", "items": {"type": "string"}},
        "resource_signing_alg_values_supported": {"type": "array", "items": {"type": "string"}},
        "resource_name": {"type": "string"},
    },
}
# POST /tools/{key} with `Accept: application/json`: the structured result, and errors as {error, type}.
CALL_RESULT = {
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
        "typed": {"type": "boolean", "description": "`result` is the tool's typed output, parsed and checked."},
        "text": {"type": "string"},
        "seconds": {"type": "number"},
    },
}

# The 200 answer of an exec or curl tool (either form): its exit code. fn tools run no process: absent.
EXIT_CODE_DOC = {
    "description": "Exec and curl tools only: the exit code (0 success, -1 killed by the timeout, "
    "another negative number: killed by that signal); absent for fn tools",
    "schema": {"type": "integer"},
}


def text_or_json(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plain text by default; JSON to a client that sends `Accept: application/json`."""
    answer = text_response(description)
    answer["content"]["application/json"] = {"schema": schema or ERR}
    return answer


UNAUTH = json_response(ERR, "Key missing, invalid or expired")
BAD = json_response(ERR, "Bad query parameter")
# A tool key is `<group>.<name>` (the catalog's GROUP_PATTERN and NAME_PATTERN); anything else is a 404.
KEY_PARAM = {
    "name": "key",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.[A-Za-z_][A-Za-z0-9_-]*$"},
}


# The document's `components.schemas`, by name (the fragments above refer to them as #/components/schemas/<name>).
COMPONENTS: dict[str, dict[str, Any]] = {
    "Error": _ERROR,
    "Status": _STATUS,
    "Param": _PARAM,
    "Annotations": _ANNOTATIONS,
    "Tool": _TOOL,
    "Identity": _IDENTITY,
    "User": _USER,
    "Reload": _RELOAD,
    "SearchPage": _PAGE,
    "ResourceMetadata": _RESOURCE,
}
