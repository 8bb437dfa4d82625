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
multi round-trip answer does; accept keeps it waiting. `tasks/cancel` cancels the job (a running one's
processes are killed); a job already ended is acknowledged all the same (cancellation is cooperative).

Scoping is the jobs' own: a job is visible to its requester, the tool's approvers and admins; to anyone else
`tasks/get`, `tasks/update` and `tasks/cancel` answer exactly as for a task that does not exist. A client that
does not declare the extension keeps the behaviour of approvals.py. The methods are registered on the
low-level server toolrun already runs (`add_request_handler`); nothing here needs the high-level server.
"""

from __future__ import annotations

import datetime
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...errors import Conflict, NotFound, ToolrunError
from ...jobrecord import AWAITING, RUNNING
from ...models import Identity, ToolSpec
from .approvals import final_answer, question

EXTENSION = "io.modelcontextprotocol/tasks"
POLL_MS = 1000  # pollIntervalMs suggested to clients
UNKNOWN = "Unknown task"  # the one answer for an id that does not exist and for one this caller may not see


class TaskIdParams(types.RequestParams):
    task_id: str


class TaskUpdateParams(types.RequestParams):
    task_id: str
    input_responses: dict[str, Any] | None = None


def declared(ctx: Any) -> bool:
    """Whether the client of this request declared the Tasks extension (never assumed). Only 2026-07-28 requests
    carry per-request capabilities; a handshake-era wire cannot carry a task result (the SDK sieves it)."""
    if getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
        return False
    meta = getattr(ctx, "meta", None)
    capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def _iso(moment: float | None) -> str:
    when = datetime.datetime.fromtimestamp(moment or 0.0, tz=datetime.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def approval_key(job: dict[str, Any]) -> str:
    """The key of the approval question in `inputRequests` (unique over the task's lifetime: one question)."""
    return f"approval-{job['id']}"


def task_fields(job: dict[str, Any], retention: float) -> dict[str, Any]:
    """The job as a DetailedTask (SEP-2663): status and the payload of that status."""
    state = job["state"]
    task: dict[str, Any] = {
        "taskId": job["id"],
        "status": "working",
        "createdAt": _iso(job["created"]),
        "lastUpdatedAt": _iso(job["updated"]),
        "ttlMs": int(retention * 1000),
        "pollIntervalMs": POLL_MS,
    }
    if state == AWAITING:
        form = types.ElicitRequestFormParams(
            message=question(job), requested_schema={"type": "object", "properties": {}}
        )
        request = types.ElicitRequest(params=form).model_dump(by_alias=True, exclude_none=True, mode="json")
        task.update(status="input_required", statusMessage=question(job), inputRequests={approval_key(job): request})
        if job.get("expires_at"):
            task["ttlMs"] = max(0, int((job["expires_at"] - job["created"] + retention) * 1000))
    elif state == RUNNING:
        task["statusMessage"] = f"{job['tool']} is running (job {job['id']})"
    elif state == "cancelled":
        by = f" by {job['decided_by']}" if job.get("decided_by") else ""
        why = f": {job['reason']}" if job.get("reason") else ""
        task.update(status="cancelled", statusMessage=f"job {job['id']} was cancelled{by}{why}")
    else:
        answer = final_answer(job)
        task.update(status="completed", result=answer.model_dump(by_alias=True, exclude_none=True, mode="json"))
        task["statusMessage"] = f"job {job['id']} {job['state']}"
    return task


def created(job: dict[str, Any], retention: float) -> dict[str, Any]:
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


def entry(tool: ToolSpec) -> dict[str, Any]:
    return entry_flag(tool, tool.entry())


def words(tool: ToolSpec) -> str:
    """The describe_tools line saying how such a call answers."""
    if not may_task(tool):
        return ""
    why = "it needs approval" if tool.approval else "it runs in the background"
    return f"\nmay answer with a task ({EXTENSION}) when your client declares it: {why}; follow it with tasks/get"


class McpTasks:
    """tasks/get, tasks/update, tasks/cancel for one door (its service's jobs, its way of telling who calls)."""

    def __init__(self, door: Any) -> None:
        self.door = door

    @property
    def jobs(self) -> Any:
        return self.door.service.jobs

    def register(self, server: Any) -> None:
        server.extensions[EXTENSION] = {}
        server.add_request_handler("tasks/get", TaskIdParams, self.get)
        server.add_request_handler("tasks/update", TaskUpdateParams, self.update)
        server.add_request_handler("tasks/cancel", TaskIdParams, self.cancel)

    async def _job(self, ctx: Any, task_id: str) -> tuple[Identity, dict[str, Any]]:
        try:
            identity = self.door.identify(ctx)
            return identity, await self.jobs.get(identity, task_id)
        except NotFound:
            raise MCPError(types.INVALID_PARAMS, UNKNOWN) from None
        except ToolrunError as exc:
            raise MCPError(types.INVALID_REQUEST, exc.summary) from None

    async def get(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        _, job = await self._job(ctx, params.task_id)
        return {"resultType": "complete", **task_fields(job, self.jobs.retention)}

    async def update(self, ctx: Any, params: TaskUpdateParams) -> dict[str, Any]:
        identity, job = await self._job(ctx, params.task_id)
        answer = (params.input_responses or {}).get(approval_key(job))
        action = answer.get("action") if isinstance(answer, dict) else getattr(answer, "action", None)
        if job["state"] == AWAITING and action in ("decline", "cancel"):
            try:
                await self.jobs.cancel(identity, job["id"], "withdrawn by the requester")
            except Conflict:  # decided meanwhile: the answer no longer applies
                pass
        return {"resultType": "complete"}

    async def cancel(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        identity, job = await self._job(ctx, params.task_id)
        try:
            await self.jobs.cancel(identity, job["id"], "cancelled by the client (tasks/cancel)")
        except Conflict:  # it already ended: acknowledged all the same
            pass
        return {"resultType": "complete"}
