"""The OpenAPI 3.1 document of the plain HTTP routes (served at /openapi.json), built from the route table.

Besides the generic `/tools/{key}`, the document has one path per tool the caller may see,
`/tools/<key>`, whose POST request body is that tool's own JSON Schema (types, required params,
`enum`, `pattern`, bounds; the same schema MCP clients get) and whose `x-toolrun-annotations`
carries the tool's behaviour hints. An anonymous caller's document names public tools only.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..models import ToolSpec
from ..paramtypes import request_schema
from .openapi_schemas import COMPONENTS

if TYPE_CHECKING:
    from ..access import Mode
    from .routes import RouteDef

_OPTIONAL: list[dict[str, list[str]]] = [{}, {"ApiKeyHeader": []}, {"Bearer": []}, {"ApiKeyQuery": []}]
_REQUIRED: list[dict[str, list[str]]] = [{"ApiKeyHeader": []}, {"Bearer": []}, {"ApiKeyQuery": []}]
# A route's auth mode as OpenAPI security: who may call it, and with which credentials.
SECURITY: dict[Mode, list[dict[str, list[str]]]] = {
    "anonymous": [],
    "optional": _OPTIONAL,
    "keyed": _OPTIONAL,
    "required": _REQUIRED,
    "admin": _REQUIRED,
}


def document(routes: Sequence[RouteDef], tools: Sequence[ToolSpec] = ()) -> dict[str, Any]:
    """The document of `routes` (the app's ROUTES: each row's operation, its auth mode as security);
    `tools` (the caller's) each get a path with their own request schema."""
    doc = _document(routes)
    post = doc["paths"]["/tools/{key}"]["post"]
    for tool in tools:
        name = f"{tool.key}.arguments"
        doc["components"]["schemas"][name] = request_schema(tool)
        operation = copy.deepcopy(post)
        operation.pop("parameters", None)  # the path names the tool: no {key} to fill in
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


def _document(routes: Sequence[RouteDef]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if not route.documented:
            continue
        operation = {"summary": route.summary, "security": SECURITY[route.auth], **route.operation}
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "toolrun", "version": __version__, "description": "Tool catalog service: HTTP routes."},
        "components": {
            "schemas": dict(COMPONENTS),
            "securitySchemes": {
                "ApiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "Bearer": {"type": "http", "scheme": "bearer"},
                "ApiKeyQuery": {"type": "apiKey", "in": "query", "name": "api-key"},
            },
        },
        "paths": paths,
    }
