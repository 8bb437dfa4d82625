"""The MCP door's answer to a call that needs approval (docs/jobs.md): the job is made by `service.jobs`.

- 2026-07-28 clients: a multi round-trip answer, `input_required` with a form elicitation ("waiting for
  approval: accept to keep waiting, decline to cancel") and `requestState` naming the job; the client
  retries with the response, and gets the result once an approver decided (or the question again).
- handshake-era clients that declared `elicitation` and have a channel back (stdio): the same question
  as an `elicitation/create` request, asked until the job is decided.
- any other client: an error result naming the job and how to follow it (`GET /jobs/<id>`,
  `toolrun jobs tail <id>`).

The requester never approves its own call: the question only lets it wait or withdraw (cancel).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...errors import NotFound, ToolrunError
from ...jobrecord import AWAITING, FINAL
from ...models import Identity

STATE_PREFIX = "toolrun-job:"
WAIT = 20.0  # seconds one round waits for the decision before asking again
ROUNDS = 30  # questions asked on one handshake-era call before it ends with the fallback answer
EMPTY_FORM: dict[str, Any] = {"type": "object", "properties": {}}


def question(job: dict[str, Any]) -> str:
    approvers = ", ".join(job["approvers"])
    return (
        f"{job['tool']} needs approval by a member of {approvers} (job {job['id']}). "
        "Accept to keep waiting for the decision; decline to withdraw the call."
    )


def _text(text: str, structured: dict[str, Any] | None = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured, is_error=error
    )


def pending_answer(job: dict[str, Any]) -> types.CallToolResult:
    """The fallback: the job is waiting; where to follow it."""
    job_id = job["id"]
    follow = f"Follow it with GET /jobs/{job_id} or `toolrun jobs tail {job_id}`"
    if job["state"] == AWAITING:
        text = (
            f"{job['tool']} needs approval by a member of {', '.join(job['approvers'])}: job {job_id} awaits the "
            f"decision. {follow}; an approver runs `toolrun jobs approve {job_id}`."
        )
    else:
        text = f"job {job_id} ({job['tool']}) is {job['state']}. {follow}."
    return _text(text, {"job": job_id, "status": job["state"], "location": f"/jobs/{job_id}"}, error=True)


def final_answer(job: dict[str, Any]) -> types.CallToolResult:
    """A decided job as the tool result the plain call would have given (or why it did not run)."""
    result = job.get("result")
    if result is not None and result["status"] == 200:
        structured = result["json"] if isinstance(result["json"], dict) else None
        return _text(result["text"], structured)
    if result is not None:
        return _text(result["text"], {"error": result["json"].get("type"), "message": result["text"]}, error=True)
    why = f" by {job['decided_by']}" if job.get("decided_by") else ""
    why += f": {job['reason']}" if job.get("reason") else ""
    why += f" ({job['error']})" if job.get("error") else ""
    text = f"job {job['id']} ({job['tool']}) was {job['state']}{why}; the tool did not run."
    return _text(text, {"job": job["id"], "status": job["state"]}, error=True)


class McpJobs:
    """Approval over MCP for one door; `service` is the door's ToolService (its `start_or_call` makes the job)."""

    def __init__(self, service: Any) -> None:
        self.service = service

    async def resume(self, ctx: Any, identity: Identity, params: Any) -> Any:
        """A 2026-07-28 retry: the client's answer to the question, with the job in `requestState`."""
        job_id = str(params.request_state)[len(STATE_PREFIX) :]
        jobs = self.service.jobs
        try:
            job = await jobs.get(identity, job_id)
        except NotFound:
            return _text("No such job is available to you.", {"error": "NotFound"}, error=True)
        responses = params.input_responses or {}
        answer = responses.get("approval")
        action = getattr(answer, "action", None) if answer is not None else None
        if job["state"] == AWAITING and action in ("decline", "cancel"):
            try:
                job = await jobs.cancel(identity, job_id, "withdrawn by the requester")
            except ToolrunError:
                job = await jobs.get(identity, job_id)
        return await self.follow(ctx, identity, job)

    async def follow(self, ctx: Any, identity: Identity, job: dict[str, Any]) -> Any:
        jobs = self.service.jobs
        job = await jobs.wait(identity, job["id"], 0.5 if job["state"] == AWAITING else WAIT)
        if job["state"] == AWAITING:
            asked = await self._ask(ctx, identity, job)
            if isinstance(asked, types.InputRequiredResult):
                return asked
            job = asked
        elif job["state"] not in FINAL:
            job = await jobs.wait(identity, job["id"], WAIT)
        if job["state"] in FINAL:
            return final_answer(job)
        return pending_answer(job)

    async def _ask(self, ctx: Any, identity: Identity, job: dict[str, Any]) -> Any:
        """Ask the requester to wait (or withdraw) the way its client can; the job as it stands after."""
        if getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
            form = types.ElicitRequestFormParams(message=question(job), requested_schema=EMPTY_FORM)
            return types.InputRequiredResult(
                input_requests={"approval": types.ElicitRequest(params=form)},
                request_state=STATE_PREFIX + job["id"],
            )
        session = getattr(ctx, "session", None)
        capabilities = getattr(session, "client_capabilities", None)
        if session is None or getattr(capabilities, "elicitation", None) is None or not session.can_send_request:
            return job
        jobs = self.service.jobs
        for _ in range(ROUNDS):
            answer = await session.elicit_form(question(job), EMPTY_FORM)
            if answer.action != "accept":
                return await jobs.cancel(identity, job["id"], "withdrawn by the requester")
            job = await jobs.wait(identity, job["id"], WAIT)
            if job["state"] != AWAITING:
                return await jobs.wait(identity, job["id"], WAIT)
        return job
