"""The MCP Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) served from job records (jobs.py).

A 2026-07-28 client that declares the extension on its request (`params._meta` clientCapabilities
`extensions`) gets a task (`resultType: "task"`)
for a call that becomes a job: one that needs approval, or an `async: true` tool. Its id is the job's.

    job state            task status       what tasks/get carries
    awaiting_approval    input_required    `inputRequests`: the question (accept: keep waiting, decline: withdraw)
    running              working
    succeeded, failed,   completed         `result`: the very CallToolResult the synchronous call would have
    timed_out, denied,                     given (a failed command, a denial or an expiry: `isError: true`)
    expired
    cancelled            cancelled         `statusMessage`: who cancelled it, and why

`tasks/update` carries the requester's answer to the question: decline (or cancel) withdraws the call, as the
multi round-trip answer does; accept keeps it waiting. Only the requester answers it (an approver's decline would be
recorded as the requester's withdrawal). `tasks/cancel` cancels the job (a running one's
processes are killed); a job already ended is acknowledged all the same (cancellation is cooperative).

Scoping is the jobs' own: a job is visible to its requester, the tool's approvers and admins; to anyone else
`tasks/get`, `tasks/update` and `tasks/cancel` answer exactly as for a task that does not exist. A client that
does not declare the extension keeps the behaviour of approvals.py. The methods are registered on the
low-level server toolrun already runs (`add_request_handler`); nothing here needs the high-level server.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...errors import Conflict, NotFound, ToolrunError
from ...jobrecord import AWAITING, RUNNING, Job, is_requester
from ...models import Identity, ToolSpec
from .approvals import final_answer, question

if TYPE_CHECKING:
    from ...jobs import Jobs

EXTENSION = "io.modelcontextprotocol/tasks"
POLL_MS = 1000  # pollIntervalMs suggested to clients
UNKNOWN = "Unknown task"  # the one answer for an id that does not exist and for one this caller may not see


class TaskIdParams(types.RequestParams):
    task_id: Any = None  # checked by the handler, after the capability (a client without it hears that first)


class TaskUpdateParams(TaskIdParams):
    input_responses: Any = None


def _declares(extensions: Any) -> bool:
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def declared(ctx: Any) -> bool:
    """Whether the client of this request declared the Tasks extension (never assumed): in the request's
    per-request capabilities (`params._meta`), or, for a handshake-era client, in its `initialize` capabilities."""
    meta = getattr(ctx, "meta", None)
    capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    if isinstance(capabilities, dict) and _declares(capabilities.get("extensions")):
        return True
    if getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        return False
    session = getattr(ctx, "session", None)
    return _declares(getattr(getattr(session, "client_capabilities", None), "extensions", None))


def modern(ctx: Any) -> bool:
    return getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


# A handshake-era `tools/call` result is checked against CallToolResult by the SDK before it is sent, which a
# task is not: the door hands over a CallToolResult carrying the task under this `_meta` key, and
# `TaskMiddleware` (or the fast path, fast.py) answers the task itself in its place.
CARRIED = "io.toolrun/task"


def carried(task: dict[str, Any]) -> types.CallToolResult:
    text = types.TextContent(type="text", text=f"task {task['taskId']}: {task['status']}")
    return types.CallToolResult(content=[text], _meta={CARRIED: task})


def unwrap(result: dict[str, Any]) -> dict[str, Any]:
    """The task a serialised `tools/call` result carries (`carried`), else the result as it is."""
    meta = result.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get(CARRIED), dict):
        return dict(meta[CARRIED])
    return result


class TaskMiddleware:
    """The SDK server middleware that puts a carried task in place of its `tools/call` result."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if getattr(ctx, "method", None) == "tools/call" and isinstance(result, dict):
            return unwrap(result)
        return result


def _iso(moment: float | None) -> str:
    when = datetime.datetime.fromtimestamp(moment or 0.0, tz=datetime.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def approval_key(job: Job) -> str:
    """The key of the approval question in `inputRequests` (unique over the task's lifetime: one question)."""
    return f"approval-{job.id}"


def task_fields(job: Job, retention: float) -> dict[str, Any]:
    """The job as a DetailedTask (SEP-2663): status and the payload of that status."""
    state = job.state
    task: dict[str, Any] = {
        "taskId": job.id,
        "status": "working",
        "createdAt": _iso(job.created),
        "lastUpdatedAt": _iso(job.updated),
        "ttlMs": int(retention * 1000),
        "pollIntervalMs": POLL_MS,
    }
    if state == AWAITING:
        form = types.ElicitRequestFormParams(
            message=question(job), requested_schema={"type": "object", "properties": {}}
        )
        request = types.ElicitRequest(params=form).model_dump(by_alias=True, exclude_none=True, mode="json")
        task.update(status="input_required", statusMessage=question(job), inputRequests={approval_key(job): request})
        if job.expires_at:
            task["ttlMs"] = max(0, int((job.expires_at - job.created + retention) * 1000))
    elif state == RUNNING:
        task["statusMessage"] = f"{job.tool} is running (job {job.id})"
    elif state == "cancelled":
        by = f" by {job.decided_by}" if job.decided_by else ""
        why = f": {job.reason}" if job.reason else ""
        task.update(status="cancelled", statusMessage=f"job {job.id} was cancelled{by}{why}")
    else:
        answer = final_answer(job)
        task.update(status="completed", result=answer.model_dump(by_alias=True, exclude_none=True, mode="json"))
        task["statusMessage"] = f"job {job.id} {job.state}"
    return task


def created(job: Job, retention: float) -> dict[str, Any]:
    """The `tools/call` answer that hands the client a task: a CreateTaskResult."""
    fields = task_fields(job, retention)
    seed = {k: fields[k] for k in ("taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs")}
    if "statusMessage" in fields:
        seed["statusMessage"] = fields["statusMessage"]
    return {"resultType": "task", **seed}


def may_task(tool: ToolSpec) -> bool:
    """Whether a call of this tool may answer with a task (it becomes a job: approval, or `async: true`)."""
    return tool.approval or tool.run_async


def entry_flag(tool: ToolSpec, item: dict[str, Any]) -> dict[str, Any]:
    """`item` (a search or describe_tools entry) with `task: true` when the tool may answer with a task."""
    return {**item, "task": True} if may_task(tool) else item


def words(tool: ToolSpec) -> str:
    """The describe_tools line saying how such a call answers."""
    if not may_task(tool):
        return ""
    why = "it needs approval" if tool.approval else "it runs in the background"
    return f"\nmay answer with a task ({EXTENSION}) when your client declares it: {why}; follow it with tasks/get"


def _check_name_header(ctx: Any, task_id: str) -> None:
    """SEP-2663 over HTTP: a 2026-07-28 request for a task names it in `Mcp-Name` (routers route by it); one that
    names another task is refused as the SDK refuses a mismatched `tools/call` (-32020). One without the header
    is served (the mcp 2.3 SDK's client sends none for extension methods): nothing here routes by it."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    if headers is None or not modern(ctx):
        return
    name = headers.get("mcp-name")
    if name is not None and name != task_id:
        raise MCPError(types.HEADER_MISMATCH, "mcp-name header does not match the request body's 'taskId' parameter")


class McpTasks:
    """tasks/get, tasks/update, tasks/cancel for one door (its service's jobs, its way of telling who calls)."""

    def __init__(self, door: Any) -> None:
        self.door = door

    @property
    def jobs(self) -> Jobs:
        jobs: Jobs = self.door.service.jobs
        return jobs

    def register(self, server: Any) -> None:
        server.extensions[EXTENSION] = {}
        server.middleware.append(TaskMiddleware())
        server.add_request_handler("tasks/get", TaskIdParams, self.get)
        server.add_request_handler("tasks/update", TaskUpdateParams, self.update)
        server.add_request_handler("tasks/cancel", TaskIdParams, self.cancel)

    async def _job(self, ctx: Any, task_id: str) -> tuple[Identity, Job]:
        if not declared(ctx):  # SEP-2575: the capability this method needs is missing
            data: dict[str, Any] = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
            raise MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability", data)
        if not isinstance(task_id, str) or not task_id:
            raise MCPError(types.INVALID_PARAMS, "`taskId` (a string) is required")
        _check_name_header(ctx, task_id)
        try:
            identity = self.door.identify(ctx)
            return identity, await self.jobs.get(identity, task_id)
        except NotFound:
            raise MCPError(types.INVALID_PARAMS, UNKNOWN) from None
        except ToolrunError as exc:
            raise MCPError(types.INVALID_REQUEST, exc.summary) from None

    async def get(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        _, job = await self._job(ctx, params.task_id)
        return task_fields(job, self.jobs.retention)  # the SDK adds `resultType: complete` on 2026-07-28

    async def update(self, ctx: Any, params: TaskUpdateParams) -> dict[str, Any]:
        identity, job = await self._job(ctx, params.task_id)
        if not is_requester(identity, job):  # an approver who sees the task: its answer would pass for the requester's
            raise MCPError(
                types.INVALID_PARAMS,
                "only the requester of a task answers its question; an approver approves or denies the job "
                f"(POST /jobs/{job.id}/approve or /deny), or cancels it with tasks/cancel",
            )
        responses = params.input_responses if isinstance(params.input_responses, dict) else {}
        answer = responses.get(approval_key(job))
        action = answer.get("action") if isinstance(answer, dict) else getattr(answer, "action", None)
        if job.state == AWAITING and action in ("decline", "cancel"):
            try:
                await self.jobs.cancel(identity, job.id, "withdrawn by the requester")
            except Conflict:  # decided meanwhile: the answer no longer applies
                pass
        return {}  # an empty acknowledgement (`resultType: complete` on 2026-07-28, added by the SDK)

    async def cancel(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        identity, job = await self._job(ctx, params.task_id)
        try:
            await self.jobs.cancel(identity, job.id, "cancelled by the client (tasks/cancel)")
        except Conflict:  # it already ended: acknowledged all the same
            pass
        return {}  # an empty acknowledgement (`resultType: complete` on 2026-07-28, added by the SDK)
