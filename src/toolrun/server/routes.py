"""The route table: one row per HTTP route, feeding the dispatcher (dispatch.py) and /openapi.json.

A row names the path (as documented; `{key}` is the rest of the path, slashes included), the method,
the handler, the auth mode the handler applies (`toolrun.access.Mode`: anonymous, optional, keyed,
required, admin; it is also the operation's OpenAPI `security`), how it is served and the OpenAPI
operation. `serve="plain"` rows are the hot ones: their handler is a plain ASGI object of
plain.PLAIN_HANDLERS, which the dispatcher hands a request without the router (the `hot_routes`
speedup; with it off they are served through the router like the rest). The other handlers are
`app.Routes` methods, served through Starlette's router. The router tries rows in order: the hot
route comes first.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .openapi_schemas import BAD, CALL_RESULT, ERR, EXIT_CODE_DOC, KEY_PARAM, UNAUTH, json_response, text_or_json

if TYPE_CHECKING:
    from ..access import Mode
    from ..settings import Settings

# How a row is served: "plain", its handler takes the request without the router (when `hot_routes` is on);
# "starlette", through the router.
Serve = Literal["plain", "starlette"]


@dataclass(frozen=True, slots=True)
class RouteDef:
    path: str
    method: str
    handler: str  # a method of app.Routes, `jobs.<method>` of jobroutes.JobRoutes, or a plain handler (dispatch)
    auth: Mode
    summary: str = ""
    operation: dict[str, Any] = field(default_factory=dict)  # OpenAPI: parameters, requestBody, responses
    documented: bool = True
    serve: Serve = "starlette"

    @property
    def starlette_path(self) -> str:
        return self.path.replace("{key}", "{key:toolkey}")


_STATUS = {"$ref": "#/components/schemas/Status"}
_PAGING = [
    {
        "name": "offset",
        "in": "query",
        "required": False,
        "description": "With offset or limit, one page; its position is in the X-* headers.",
        "schema": {"type": "integer", "minimum": 0, "maximum": 1000000},
    },
    {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
]

_JOB_STARTED = {
    "type": "object",
    "required": ["job", "status"],
    "properties": {"job": {"type": "string"}, "status": {"type": "string"}},
}
_JOB = {
    "type": "object",
    "required": ["job", "status", "tool"],
    "properties": {
        "job": {"type": "string"},
        "status": {
            "type": "string",
            "enum": [
                "awaiting_approval",
                "running",
                "succeeded",
                "failed",
                "timed_out",
                "cancelled",
                "denied",
                "expired",
            ],
        },
        "tool": {"type": "string"},
        "requester": {"type": ["string", "null"]},
        "args": {"type": "object"},
        "result": {"type": "object"},
        "output": {"type": "object"},
    },
}
_JOB_PARAM = {"name": "id", "in": "path", "required": True, "schema": {"type": "string", "maxLength": 64}}
_REASON = {
    "required": False,
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"reason": {"type": "string", "maxLength": 1000}},
                "additionalProperties": False,
            }
        }
    },
}
_JOB_404 = json_response(ERR, "Unknown job, or one the caller may not see")


def _job_action(action: str, summary: str) -> RouteDef:
    return RouteDef(
        f"/jobs/{{id}}/{action}",
        "POST",
        f"jobs.{action}_job",
        "optional",
        summary,
        {
            "parameters": [_JOB_PARAM],
            "requestBody": _REASON,
            "responses": {
                "200": json_response(_JOB, "The job after the action"),
                "400": BAD,
                "403": json_response(ERR, "Not allowed (not an approver; the requester approving its own call)"),
                "404": _JOB_404,
                "409": json_response(ERR, "The job is not in a state that allows it"),
                "408": json_response(ERR, "Body not received in time"),
                "413": json_response(ERR, "Body too large"),
                "415": json_response(ERR, "The body is not application/json"),
            },
        },
    )


JOB_ROUTES: tuple[RouteDef, ...] = (
    RouteDef(
        "/jobs",
        "GET",
        "jobs.list_jobs",
        "optional",
        "One page of the jobs the caller may see (its own calls; for approvers, their tools' calls), newest first; "
        "the next page is named in `X-Next-Cursor` and `Link` (rel=next)",
        {
            "parameters": [
                {
                    "name": "status",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "enum": _JOB["properties"]["status"]["enum"]},  # type: ignore[index]
                },
                {
                    "name": "limit",
                    "in": "query",
                    "required": False,
                    "description": "Jobs in the page (default 100).",
                    "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
                },
                {
                    "name": "cursor",
                    "in": "query",
                    "required": False,
                    "description": "Where the page starts: the `X-Next-Cursor` of the previous page (opaque).",
                    "schema": {"type": "string"},
                },
            ],
            "responses": {"200": json_response({"type": "array", "items": _JOB}, "The jobs"), "400": BAD},
        },
    ),
    RouteDef(
        "/jobs/{id}",
        "GET",
        "jobs.get_job",
        "optional",
        "One job: its state; its output so far while it runs; its result once it ran",
        {"parameters": [_JOB_PARAM], "responses": {"200": json_response(_JOB, "The job"), "404": _JOB_404}},
    ),
    RouteDef(
        "/jobs/{id}/events",
        "GET",
        "jobs.job_events",
        "optional",
        "Follow a job: server-sent events, one `job` event per change, until it ends",
        {
            "parameters": [_JOB_PARAM],
            "responses": {
                "200": {"description": "Events", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                "404": _JOB_404,
            },
        },
    ),
    _job_action("approve", "Approve a call awaiting approval (its tool's approvers; never its requester); it runs"),
    _job_action("deny", "Deny a call awaiting approval, with an optional reason"),
    _job_action("cancel", "Cancel a job awaiting approval or running (its processes are killed)"),
    _job_action(
        "hold",
        "The requester still waits for the decision: its hold lasts 10 s more (a waiting client renews it; a hold "
        "that lapses withdraws the request)",
    ),
    _job_action(
        "withdraw",
        "The requester stops waiting: its request is cancelled (reason: withdrawn: the requester stopped waiting)",
    ),
)

ROUTES: tuple[RouteDef, ...] = (
    RouteDef(
        "/tools/{key}",
        "POST",
        "tool_call",
        "optional",
        "Call a tool; the result as text, or as JSON to `Accept: application/json`",
        {
            "parameters": [KEY_PARAM],
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
            },
            "responses": {
                "200": {
                    **text_or_json("The result as text (an exec failure is a normal tuple result)", CALL_RESULT),
                    "headers": {"X-Toolrun-Exit-Code": EXIT_CODE_DOC},
                },
                "400": text_or_json("Malformed JSON, not an object, or a parameter error"),
                "403": text_or_json("Cross-origin request not allowed"),
                "404": text_or_json("Unknown or inaccessible key"),
                "408": text_or_json("Body not received in time"),
                "413": text_or_json("Body too large"),
                "415": text_or_json("Content-Type is not application/json"),
                "202": json_response(
                    _JOB_STARTED, "The call is a job (approval, `async: true`, `Prefer: respond-async`)"
                ),
                "429": text_or_json("Rate limited; Retry-After gives the seconds"),
                "500": text_or_json("The tool raised"),
                "502": text_or_json(
                    "A typed output (`output:`) did not parse or match its schema: the message names the first "
                    "mismatch; the JSON form carries the raw text in `output`"
                ),
                "503": text_or_json("Too many calls running"),
            },
        },
        serve="plain",
    ),
    RouteDef(
        "/healthz",
        "GET",
        "healthz",
        "anonymous",
        "Liveness",
        {"responses": {"200": json_response(_STATUS, "Alive")}},
        serve="plain",
    ),
    RouteDef(
        "/readyz",
        "GET",
        "readyz",
        "anonymous",
        "Readiness: search index, cache backend, key store, sandbox engine",
        {
            "responses": {
                "200": json_response(_STATUS, "Every check passed"),
                "503": json_response(_STATUS, "A check failed"),
            }
        },
    ),
    RouteDef(
        "/whoami",
        "GET",
        "whoami",
        "required",
        "The caller's identity; for admins, why a user may (not) see and call a tool",
        {
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
                "200": json_response({"$ref": "#/components/schemas/Identity"}, "Identity record"),
                "400": BAD,
                "401": UNAUTH,
            },
        },
    ),
    RouteDef(
        "/tools",
        "GET",
        "list_tools",
        "optional",
        "Tools the caller can access, sorted by key",
        {
            "parameters": [
                {
                    "name": "format",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "enum": ["json", "md", "html"], "default": "json"},
                },
                *_PAGING,
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
                "400": BAD,
            },
        },
    ),
    RouteDef(
        "/tools/{key}",
        "GET",
        "get_tool",
        "optional",
        "One tool entry",
        {
            "parameters": [KEY_PARAM],
            "responses": {
                "200": json_response({"$ref": "#/components/schemas/Tool"}, "The tool"),
                "400": BAD,
                "404": json_response(ERR, "Unknown or inaccessible key"),
            },
        },
        serve="plain",
    ),
    RouteDef(
        "/users",
        "GET",
        "users",
        "admin",
        "All users (admin)",
        {
            "parameters": [
                {
                    "name": "keys",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "enum": ["true", "false"]},
                }
            ],
            "responses": {
                "200": json_response({"type": "array", "items": {"$ref": "#/components/schemas/User"}}, "Users"),
                "400": BAD,
                "401": UNAUTH,
            },
        },
    ),
    RouteDef(
        "/admin/reload",
        "POST",
        "admin_reload",
        "admin",
        "Reload the catalog now (admin); on any error the old catalog keeps serving",
        {
            "responses": {
                "200": json_response({"$ref": "#/components/schemas/Reload"}, "The new catalog serves"),
                "401": UNAUTH,
                "422": json_response({"$ref": "#/components/schemas/Reload"}, "Problems; the old catalog serves"),
                "503": json_response(ERR, "The workers' reload did not finish in time"),
            },
        },
    ),
    RouteDef(
        "/metrics",
        "GET",
        "metrics",
        "anonymous",
        "Prometheus text exposition",
        {"responses": {"200": {"description": "Metrics", "content": {"text/plain": {"schema": {"type": "string"}}}}}},
    ),
    RouteDef(
        "/search",
        "GET",
        "search",
        "optional",
        "Ranked, paginated search over the caller's tools",
        {
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
                {
                    "name": "min_score",
                    "in": "query",
                    "required": False,
                    "description": "Only tools scoring this much or more (0 to 1); `total` counts those.",
                    "schema": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.2},
                },
                {
                    "name": "explain",
                    "in": "query",
                    "required": False,
                    "description": "1: each hit says why it ranked where it did.",
                    "schema": {"type": "string", "enum": ["0", "1", "false", "true"], "default": "0"},
                },
            ],
            "responses": {
                "200": json_response({"$ref": "#/components/schemas/SearchPage"}, "A page of results"),
                "400": BAD,
            },
        },
    ),
    *(
        RouteDef(
            f"/.well-known/oauth-protected-resource{resource}",
            "GET",
            "protected_resource",
            "anonymous",
            f"OAuth protected-resource metadata of {what}: its authorization server (404 when OAuth is off)",
            {
                "responses": {
                    "200": json_response({"$ref": "#/components/schemas/ResourceMetadata"}, "The metadata"),
                    "404": json_response(ERR, "OAuth is off (no oauth_issuer)"),
                }
            },
        )
        for resource, what in (("", "this server"), ("/mcp", "the MCP endpoint"))
    ),
    *JOB_ROUTES,
    RouteDef("/openapi.json", "GET", "openapi", "optional", "This document", documented=False),
    # The MCP endpoint (mcp/endpoint.mount_mcp; docs/mcp.md): one Starlette route for its three methods, so their rows
    # stay together. `keyed` is `optional` by another name; `mcp_auth_required` makes it `required` (for_settings).
    RouteDef("/mcp", "DELETE", "mcp", "keyed", "End an MCP session", documented=False),
    RouteDef("/mcp", "GET", "mcp", "keyed", "Listen to an MCP session's stream", documented=False),
    RouteDef("/mcp", "POST", "mcp", "keyed", "An MCP request", documented=False, serve="plain"),
)


def for_settings(rows: tuple[RouteDef, ...], settings: Settings) -> tuple[RouteDef, ...]:
    """The rows as `settings` serve them: with `mcp_auth_required`, the /mcp rows require a key (or a token)."""
    if not settings.mcp_auth_required:
        return rows
    weaker = ("anonymous", "optional", "keyed")
    return tuple(
        dataclasses.replace(row, auth="required") if row.handler == "mcp" and row.auth in weaker else row
        for row in rows
    )
