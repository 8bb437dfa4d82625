"""The MCP door: `execute`, `search`, `describe_tools`, `whoami` over the one ToolService.

Built on the SDK's low-level server (a catalog loaded at run time needs a per-caller
`tools/list`). Every call goes through `ToolService.call`, so validation, scoping, the
per-(user, tool) rate-limit bucket and the metrics are the very ones `POST /tools/{key}` uses.

Identity: over HTTP, the same key sources as the REST routes (X-API-Key, Bearer, ?api-key=);
no key means anonymous (public tools only); a key that does not resolve is a 401 before the
MCP machinery runs. Over stdio, the server acts for the user of $TOOLRUN_API_KEY when it is
set, else for the local operator (every tool, like the CLI).

Sessions (for fn tools' get_session / set_session): a stdio process is one session; a
handshake-era HTTP client's session is its `Mcp-Session-Id`; a sessionless (2026-07-28)
client with a key may pass `session` to `execute` to name one (anonymous callers may not: they
cannot be told apart). Without any, a call is identity-only. Values are stored per (user,
session), so one user never sees another's; the /mcp gate (server/run.py) binds each
`Mcp-Session-Id` to the identity that opened it.

Errors come back as results with `is_error=True` and a sentence an agent can act on; nothing
escapes as an opaque internal error.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import logging
import re
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.exceptions import MCPError

from ... import __version__, telemetry
from ...access.audit import clean_request_id, new_request_id
from ...errors import (
    CallerFull,
    NotFound,
    OutputInvalid,
    ParamError,
    RateLimited,
    SandboxUnavailable,
    ToolFailed,
    ToolrunError,
)
from ...formatting import (
    answer_text,
    describe_text,
    direct_description,
    encodable,
    scrub_surrogates,
    search_text,
    structured_result,
)
from ...models import CallOrigin, Identity, ToolSpec
from ...paramtypes import request_schema
from ...search.relevance import DEFAULT_MIN_SCORE
from ...service import JobStarted, ToolService
from ...typedoutput import mcp_output_schema, wrapped
from ...words import plural, seconds
from ..disconnect import unless_gone
from ..httperrors import public_summary
from . import tasks
from .approvals import STATE_PREFIX, WAIT, McpJobs
from .meta import ANNOTATIONS, LIST_PAGE, LIST_TTL_MS, OUTPUT_SCHEMAS, page_start

log = logging.getLogger("toolrun.mcp")
MAX_NOTIFIED_SESSIONS = 1000

INSTRUCTIONS = (
    "toolrun runs catalog tools. `search` finds them (one line each: key(params) - summary), "
    "`describe_tools` gives details and limits, `execute` runs one by key with its arguments."
)
EXAMPLE_KEY = "group.tool"  # in schemas when the caller sees no tool to take an example from


def meta_tools(example: str = EXAMPLE_KEY, words: str = "disk usage") -> dict[str, dict[str, Any]]:
    """The four meta-tools; `example` (a key) and `words` (a query) come from the caller's catalog."""
    return {
        "execute": {
            "description": (
                "Run a tool by key with its arguments. A shell tool that exits non-zero returns "
                "[returncode, stdout, stderr], not an error."
            ),
            "schema": {
                "type": "object",
                "properties": {
                    "key": {"type": "string", "description": f"Tool key, e.g. {example}."},
                    "arguments": {"type": "object", "description": "Param name to value."},
                    "session": {"type": "string", "description": "Session name (clients without MCP sessions)."},
                },
                "required": ["key"],
                "additionalProperties": False,
            },
        },
        "search": {
            "description": (
                "Find tools you may call by words, a task or a param name. Empty query: all, by key. "
                "Each hit has a score, 0-1; only hits scoring min_score or more. Pages: pass next_offset as offset."
            ),
            "schema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": f"e.g. {words!r}."},
                    "offset": {"type": "integer", "minimum": 0, "default": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                    "min_score": {"type": "number", "minimum": 0, "maximum": 1, "default": DEFAULT_MIN_SCORE},
                },
                "additionalProperties": False,
            },
        },
        "describe_tools": {
            "description": "Params (types, defaults, limits), hints and an example call of tools, by key.",
            "schema": {
                "type": "object",
                "properties": {
                    "keys": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": f"e.g. [{example!r}].",
                        "maxItems": 100,
                    }
                },
                "required": ["keys"],
                "additionalProperties": False,
            },
        },
        "whoami": {
            "description": "Your user, groups and how many tools you may call.",
            "schema": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    }


META_TOOLS = meta_tools()

MAX_SESSION_NAME = 200
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")


def direct_name(key: str, digits: int = 8) -> str:
    """A catalog key as an MCP tool name clients accept (`ops.disk_usage` -> `ops__disk_usage`).

    Every `.` becomes `__`. When that name reads back as the key (each `__` a `.`, at most 64
    characters) it is the name. Otherwise the mapping lost something (`a__b.c` and `a.b.c` would
    both be `a__b__c`; a key past 64 characters), and the name gets `_` plus the first `digits`
    hex digits of the key's SHA-256, cut to fit 64. The name depends on the key alone, so adding
    a tool never renames another; names that read back differ because their keys do.
    """
    name = _NAME_OK.sub("_", key.replace(".", "__"))
    if len(name) <= 64 and name.replace("__", ".") == key:
        return name
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:digits]
    return f"{name[: 63 - digits]}_{digest}"


def direct_names(keys: Iterable[str], chosen: Mapping[str, str] | None = None) -> dict[str, str]:
    """Direct name -> key for every key, all distinct: a name taken twice (only two hashed names
    sharing their digest, never by accident) gets more digits until none is.

    `chosen`: key -> the name its tool's `mcp_name` asks for. A chosen name that a meta-tool or an earlier
    chosen name holds is not given (the tool gets its derived name, with a warning in the log)."""
    names: dict[str, str] = {}
    for key, name in sorted((chosen or {}).items()):
        if name in META_TOOLS or name in names:
            log.warning("MCP name %s of %s is taken: it gets the name derived from its key", name, key)
            continue
        names[name] = key
    given = set(names.values())
    for key in sorted(k for k in keys if k not in given):
        digits = 8
        name = direct_name(key, digits)
        while name in names and digits < 40:
            digits += 8
            log.warning("MCP direct name %s is taken by %s: %s gets a longer one", name, names[name], key)
            name = direct_name(key, digits)
        names[name] = key
    return names


def param_schema(tool: ToolSpec) -> dict[str, Any]:
    return request_schema(tool)


_HINTS = {
    "title": "title",
    "read_only": "read_only_hint",
    "destructive": "destructive_hint",
    "idempotent": "idempotent_hint",
    "open_world": "open_world_hint",
}


def mcp_annotations(tool: ToolSpec) -> types.ToolAnnotations | None:
    """The catalog's behaviour hints as MCP tool annotations (readOnlyHint, ...), None when none is declared."""
    if not tool.annotations:
        return None
    return types.ToolAnnotations(**{_HINTS[k]: v for k, v in tool.annotations.items() if k in _HINTS})


def _text_result(text: str, structured: dict[str, Any] | None = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=error,
    )


def _error_result(exc: ToolrunError) -> types.CallToolResult:
    if isinstance(exc, NotFound):
        hint = f" Did you mean {', '.join(exc.suggestions)}?" if exc.suggestions else ""
        text = f"No tool {exc.key!r} is available to you.{hint} Use `search` to find tools."
    elif isinstance(exc, ParamError) and exc.signature:
        text = f"Invalid arguments: {exc}. Call it as {exc.signature}"
    elif isinstance(exc, ParamError):
        text = f"Invalid arguments: {exc}. Use `describe_tools` to see the parameters."
    elif isinstance(exc, CallerFull):  # a share of jobs: the message says which, and what to do
        text = f"{exc}."
    elif isinstance(exc, RateLimited):
        text = f"Rate limited: retry after {seconds(exc.retry_after)}."
    elif isinstance(exc, SandboxUnavailable):  # the caller gets the short form, the server's log the paths
        text = f"The tool failed: {public_summary(exc)}"
    elif isinstance(exc, ToolFailed):
        text = f"The tool failed: {exc.summary}"
    elif isinstance(exc, OutputInvalid):  # the reason, and the text the tool printed (typedoutput.py)
        structured = {"error": "OutputInvalid", "message": str(exc), "output": exc.output}
        return _text_result(f"The tool failed: {exc}\nIts output was:\n{exc.output}", structured, error=True)
    else:
        text = exc.summary
    return _text_result(text, {"error": type(exc).__name__, "message": text}, error=True)


def typed_answer(tool: ToolSpec, result: Any) -> types.CallToolResult:
    """A direct-mode answer of a tool with a typed `output:`: its value as structured content matching the
    tool's `outputSchema` (`{result: value}` unless the schema is an object's); a failed command is an error."""
    output = tool.typed_output
    assert output is not None
    if not result.typed:
        ex = result.exec
        state = "timed out" if ex.timed_out else f"exited with code {ex.returncode}"
        text = f"The command {state}.\nstdout:\n{ex.stdout}\nstderr:\n{ex.stderr}"
        return _text_result(text, structured_result(result), error=True)
    structured = {"result": result.value} if wrapped(output) else result.value
    return _text_result(answer_text(result), structured)


def typed_job_answer(tool: ToolSpec | None, answer: Any) -> Any:
    """A job's final answer (approvals.py) as a direct-mode call of a typed tool gives it (`typed_answer`): its
    structured content then matches the tool's `outputSchema`. Any other answer is passed on as it is."""
    if tool is None or tool.typed_output is None or not isinstance(answer, types.CallToolResult):
        return answer
    payload = answer.structured_content
    if answer.is_error or not isinstance(payload, dict) or "returncode" not in payload:
        return answer
    if payload.get("typed") is not True:
        text = f"The command exited with code {payload['returncode']}.\nstdout:\n{payload.get('stdout', '')}"
        return _text_result(text + f"\nstderr:\n{payload.get('stderr', '')}", answer.structured_content, error=True)
    value = payload.get("result")
    structured = {"result": value} if wrapped(tool.typed_output) else value
    return _text_result(json.dumps(value, ensure_ascii=False), structured)


class McpDoor:
    """Handlers for one MCP server; `identify(ctx)` tells who is calling."""

    def __init__(
        self,
        service: ToolService,
        identify: Callable[[Any], Identity],
        *,
        direct: bool = False,
        stdio_session: str | None = None,
        approval_round: float = WAIT,
    ) -> None:
        self.service = service
        self.identify = identify
        self.direct = direct
        self.stdio_session = stdio_session
        self.jobs = McpJobs(service, approval_round)
        self._direct_keys: dict[str, str] = {}
        self._direct_names: dict[str, str] = {}
        self._index_direct_names()
        # Handshake-era sessions seen lately (session id -> its ServerSession), told when the catalog changes.
        self._sessions: OrderedDict[str, Any] = OrderedDict()

    def _index_direct_names(self) -> None:
        tools = (self.service.lookup(key) for key in self.service.tool_keys())
        chosen = {tool.key: tool.mcp_name for tool in tools if tool is not None and tool.mcp_name}
        self._direct_keys = direct_names(self.service.tool_keys(), chosen) if self.direct else {}
        self._direct_names = {key: name for name, key in self._direct_keys.items()}

    def _name_of(self, key: str) -> str:
        """A direct tool's MCP name. A reload swaps the service's catalog before it tells this door
        (`catalog_changed`): a key met in between gets the names indexed again."""
        name = self._direct_names.get(key)
        if name is None:
            self._index_direct_names()
            name = self._direct_names[key]
        return name

    def _key_of(self, name: str) -> str | None:
        """The tool key of a direct MCP name (None: no such tool), indexed again once when the name is new to it."""
        if not self.direct:
            return None
        key = self._direct_keys.get(name)
        if key is None and name not in META_TOOLS:
            self._index_direct_names()
            key = self._direct_keys.get(name)
        return key

    def remember(self, ctx: Any) -> None:
        """Keep the caller's session, if it is a handshake-era one, for `notifications/tools/list_changed`."""
        session = getattr(ctx, "session", None)
        if session is None or self.stdio_session is None or getattr(ctx, "protocol_version", "") >= "2026-07-28":
            # Only stdio: over HTTP the GET /mcp and subscriptions/listen streams are told (stream.py).
            return
        sid = "stdio"
        self._sessions[sid] = session
        self._sessions.move_to_end(sid)
        while len(self._sessions) > MAX_NOTIFIED_SESSIONS:
            self._sessions.popitem(last=False)

    async def catalog_changed(self) -> None:
        """After a reload: direct tool names follow the new catalog; known sessions are told to list again."""
        self._index_direct_names()
        for sid, session in list(self._sessions.items()):
            try:
                with anyio.fail_after(1.0):
                    await session.send_tool_list_changed()
            except Exception:  # a client that is gone: forget it
                self._sessions.pop(sid, None)

    # tools/list
    def meta_tools(self, identity: Identity | None = None) -> list[types.Tool]:
        """The meta-tools, their examples taken from a tool the caller may see (none: a neutral key)."""
        specs = META_TOOLS
        if identity is not None:
            visible = self.service.list(identity)
            if visible:
                pick = next((t for t in visible if t.params), visible[0])
                words = " ".join(pick.name.replace("-", "_").split("_")[:2])
                specs = meta_tools(pick.key, words)
        return [
            types.Tool(
                name=name,
                description=spec["description"],
                input_schema=spec["schema"],
                output_schema=OUTPUT_SCHEMAS[name],
                annotations=ANNOTATIONS[name],
            )
            for name, spec in specs.items()
        ]

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        """The meta-tools, then (direct mode) the caller's tools in key order, LIST_PAGE a page (meta.py)."""
        self.remember(ctx)
        identity = self.identify(ctx)
        if not self.direct:
            return types.ListToolsResult(tools=self.meta_tools(identity), ttl_ms=LIST_TTL_MS)
        visible = self.service.list(identity)  # sorted by key
        try:
            start = page_start(getattr(params, "cursor", None), len(visible))
        except ValueError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        tools = self.meta_tools(identity) if start == 0 else []
        for tool in visible[start : start + LIST_PAGE]:
            tools.append(
                types.Tool(
                    name=self._name_of(tool.key),
                    title=tool.key,
                    description=direct_description(tool),
                    input_schema=param_schema(tool),
                    output_schema=mcp_output_schema(tool.typed_output) if tool.typed_output is not None else None,
                    annotations=mcp_annotations(tool),
                )
            )
        after = start + LIST_PAGE
        return types.ListToolsResult(
            tools=tools, next_cursor=str(after) if after < len(visible) else None, ttl_ms=LIST_TTL_MS
        )

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        if name in META_TOOLS:
            schema: dict[str, Any] = META_TOOLS[name]["schema"]
            return schema
        key = self._key_of(name)
        if key is None:
            return None
        tool = self.service.lookup(key)
        return param_schema(tool) if tool else None

    # tools/call
    def session_id(self, ctx: Any, identity: Identity, explicit: Any = None) -> str | None:
        """The session a call's values live in (the service keeps them per caller too), or None.

        A named session (`session` of `execute`) needs a key: anonymous callers cannot be told apart
        (several share an address), so they must never share values. A name longer than
        MAX_SESSION_NAME is refused, never cut. Names, stdio sessions and `Mcp-Session-Id`s live in
        separate namespaces, so a name can never reach a transport session's values.
        """
        if isinstance(explicit, str) and explicit:
            if len(explicit) > MAX_SESSION_NAME:
                raise ParamError(
                    f"`session` is {len(explicit)} characters long; a session name has at most {MAX_SESSION_NAME}"
                )
            if identity.anonymous:
                raise ParamError(
                    "a named `session` needs an API key: anonymous callers cannot be told apart, so their "
                    "session values are never kept (call without `session`, or send a key)"
                )
            return "name:" + explicit
        if self.stdio_session is not None:
            return "stdio:" + self.stdio_session
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        if headers is not None:
            sid = headers.get("mcp-session-id")
            if sid:  # minted by the SDK, and bound to its opener by the /mcp gate
                return "mcp:" + str(sid)[:MAX_SESSION_NAME]
        return None

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        self.remember(ctx)
        args = dict(params.arguments or {})
        try:
            identity = self.identify(ctx)
            state = getattr(params, "request_state", None)
            if isinstance(state, str) and state.startswith(STATE_PREFIX):  # an answer about a job (approvals.py)
                answer = await self.jobs.resume(ctx, identity, params)
                key = self._direct_keys.get(params.name) if self.direct else None
                return typed_job_answer(self.service.lookup(key) if key else None, answer)  # type: ignore[no-any-return]
            if params.name == "execute":
                return await self.execute(ctx, identity, args)
            if params.name == "search":
                return self.search(identity, args)
            if params.name == "describe_tools":
                return self.describe(identity, args)
            if params.name == "whoami":
                return self.whoami(identity)
            key = self._key_of(params.name)
            if key is not None and self.service.visible(identity, key) is not None:
                return await self.run(ctx, identity, key, args, self.session_id(ctx, identity), direct=True)
            raise self.unknown_name(identity, params.name)
        except ToolrunError as exc:
            return _error_result(exc)
        except Exception as exc:  # never an opaque internal error
            log.exception("MCP tool %s failed", params.name)
            return _error_result(ToolFailed(exc))

    def unknown_name(self, identity: Identity, name: str) -> NotFound:
        """An MCP tool name that is neither a meta-tool nor a direct tool this caller may see.

        A hidden tool's direct name gets the very answer a made-up name gets."""
        names = list(META_TOOLS)
        if self.direct:
            names += [self._name_of(t.key) for t in self.service.list(identity)]
        return NotFound(name, difflib.get_close_matches(name, names, n=3, cutoff=0.6))

    async def execute(self, ctx: Any, identity: Identity, args: dict[str, Any]) -> types.CallToolResult:
        key = args.get("key")
        if not isinstance(key, str) or not key:
            raise ParamError("`key` (a tool key string) is required")
        arguments = args.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ParamError("`arguments` must be an object of parameter name to value")
        session = args.get("session")
        if session is not None and not isinstance(session, str):
            raise ParamError("`session` must be a string naming the session")
        extra = set(args) - {"key", "arguments", "session"}
        if extra:
            raise ParamError(f"unknown field {sorted(extra)[0]!r} (execute takes key, arguments, session)")
        return await self.run(ctx, identity, key, arguments, self.session_id(ctx, identity, session))

    def origin(self, ctx: Any) -> CallOrigin:
        if self.stdio_session is not None:
            return CallOrigin("mcp-stdio", new_request_id())
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        return CallOrigin("mcp-http", clean_request_id(headers.get("x-request-id") if headers is not None else None))

    async def run(
        self,
        ctx: Any,
        identity: Identity,
        key: str,
        arguments: dict[str, Any],
        session_id: str | None,
        direct: bool = False,
    ) -> types.CallToolResult:
        token = telemetry.join_baggage(getattr(ctx, "meta", None))  # None unless tracing is on
        try:
            # Over HTTP (the SDK's request or the fast path's), cancelled if the client goes away (disconnect.py);
            # `async: true` tools run to their end within the MCP call (background=False).
            scope = getattr(getattr(ctx, "request", None), "scope", None)
            # A client that declared the Tasks extension gets a task for an `async: true` tool too (tasks.py);
            # an anonymous one cannot own a job: its call runs to its end, as for any client without the extension.
            origin, watch = self.origin(ctx), functools.partial(unless_gone, scope)
            outcome = await self.service.start_or_call(
                identity,
                key,
                arguments,
                origin=origin,
                session_id=session_id,
                background=tasks.declared(ctx) and not identity.anonymous,  # a job needs a key
                watch=watch,
            )
        finally:
            telemetry.leave(token)
        if isinstance(outcome, JobStarted):
            if tasks.declared(ctx):  # a task to follow (tasks.py)
                task = tasks.created(outcome.job, self.service.jobs.retention)
                return task if tasks.modern(ctx) else tasks.carried(task)  # type: ignore[return-value]
            answer = await self.jobs.follow(ctx, identity, outcome.job)  # approvals.py
            return typed_job_answer(self.service.lookup(key) if direct else None, answer)  # type: ignore[no-any-return]
        result = outcome
        tool = self.service.lookup(key) if direct else None
        if tool is not None and tool.typed_output is not None:
            return typed_answer(tool, result)
        text = answer_text(result)
        structured = structured_result(result)
        if not encodable(text):
            # A lone surrogate (an fn tool's text) cannot be sent as UTF-8: "?" takes its place, as in
            # the answer of `POST /tools/{key}`, instead of a failed response.
            text, structured = scrub_surrogates(text), scrub_surrogates(structured)
        return _text_result(text, structured)

    def search(self, identity: Identity, args: dict[str, Any]) -> types.CallToolResult:
        query = args.get("query") or ""
        if not isinstance(query, str):
            raise ParamError("`query` must be a string")
        offset, limit = args.get("offset", 0), args.get("limit", 10)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ParamError("`offset` must be an integer >= 0")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
            raise ParamError("`limit` must be an integer from 1 to 100")
        floor = args.get("min_score", DEFAULT_MIN_SCORE)
        if not isinstance(floor, int | float) or isinstance(floor, bool) or not 0 <= floor <= 1:
            raise ParamError("`min_score` must be a number from 0 to 1")
        page = self.service.search(identity, query[:500], offset, limit, float(floor))
        items: list[dict[str, Any]] = [
            {"key": t.key, "groups": list(t.groups), "summary": t.summary, "example": t.example} for t in page.items
        ]
        if page.scores is not None:
            for item, relevance in zip(items, page.scores, strict=True):
                item["score"] = relevance
        body = {
            "query": query,
            "items": [tasks.entry_flag(t, item) for t, item in zip(page.items, items, strict=True)],
            "total": page.total,
            "offset": page.offset,
            "has_more": page.has_more,
            "next_offset": page.next_offset,
        }
        text = search_text(page.items, page.total, page.offset, page.next_offset, page.scores, float(floor))
        return _text_result(text, body)

    def describe(self, identity: Identity, args: dict[str, Any]) -> types.CallToolResult:
        keys = args.get("keys")
        if isinstance(keys, str):
            keys = [keys]
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise ParamError("`keys` must be a list of tool keys")
        tools, missing = [], []
        for key in keys[:100]:
            try:
                tools.append(self.service.describe(identity, key))
            except NotFound:
                missing.append(key)
        body = {"tools": [tasks.entry_flag(t, self.service.entry(t)) for t in tools], "not_found": missing}
        parts = [describe_text(t) + tasks.words(t) for t in tools]
        if missing:
            parts.append(f"Not found: {', '.join(missing)}. Use `search` to find tools.")
        return _text_result("\n\n".join(parts), body)

    def whoami(self, identity: Identity) -> types.CallToolResult:
        tools = [t.key for t in self.service.list(identity)]
        body = {
            "username": identity.username,
            "email": identity.email,
            "groups": sorted(identity.groups),
            "tools": tools,  # the identity record of GET /whoami, for programs; the text has the count
        }
        who = identity.username or "anonymous"
        if identity.email:
            who += f" <{identity.email}>"
        groups = ", ".join(sorted(identity.groups)) or "none"
        text = f"{who}; groups: {groups}; {plural(len(tools), 'tool')} (list them with `search`)"
        return _text_result(text, body)


def build_server(door: McpDoor, list_changed: bool = False, listen: Any = None) -> Server[Any]:
    """`listen`: the `subscriptions/listen` handler (2026-07-28 clients' change stream; stream.py)."""
    server: Server[Any] = Server(
        "toolrun",
        version=__version__,
        instructions=INSTRUCTIONS,
        get_tool_input_schema=door.input_schema,
        on_list_tools=door.list_tools,
        on_call_tool=door.call_tool,
        on_subscriptions_listen=listen,
    )
    tasks.McpTasks(door).register(server)  # io.modelcontextprotocol/tasks, from the job records
    if list_changed:
        # Announce `tools.listChanged` to handshake-era clients (stdio, and HTTP with its GET stream): a catalog
        # reload sends them notifications/tools/list_changed (the SDK's default options leave the flag off).
        server.create_initialization_options = functools.partial(  # type: ignore[method-assign]
            server.create_initialization_options, notification_options=NotificationOptions(tools_changed=True)
        )
    return server


def new_stdio_session() -> str:
    return "stdio-" + secrets.token_hex(8)
