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

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ...errors import CallerFull, ClientGone, NotFound, ToolrunError
from ...jobrecord import AWAITING, FINAL, WITHDRAWN, Job, result_answer
from ...models import Identity
from ..disconnect import unless_gone

if TYPE_CHECKING:
    from ...jobs import Jobs
    from ...service import ToolService

STATE_PREFIX = "toolrun-job:"
WAIT = 20.0  # seconds one round waits for the decision before asking again (the setting mcp_approval_round)
FIRST = 0.5  # seconds the first round waits before it asks a client that can show the question
GRACE = 60.0  # seconds the request is held between two rounds: a client that does not come back withdraws it
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
ROUNDS = 30  # questions asked on one handshake-era call before it ends with the fallback answer
POLL = 0.1  # seconds between two looks at a waited-on job
EMPTY_FORM: dict[str, Any] = {"type": "object", "properties": {}}


def question(job: Job) -> str:
    approvers = ", ".join(job.approvers)
    return (
        f"{job.tool} needs approval by a member of {approvers} (job {job.id}). "
        "Accept to keep waiting for the decision; decline to withdraw the call."
    )


def _text(text: str, structured: dict[str, Any] | None = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured, is_error=error
    )


def pending_answer(job: Job) -> types.CallToolResult:
    """The fallback: the job is waiting; where to follow it."""
    job_id = job.id
    follow = f"Follow it with GET /jobs/{job_id} or `toolrun jobs tail {job_id}`"
    if job.state == AWAITING:
        text = (
            f"{job.tool} needs approval by a member of {', '.join(job.approvers)}: job {job_id} awaits the "
            f"decision. {follow}; an approver runs `toolrun jobs approve {job_id}`."
        )
    else:
        text = f"job {job_id} ({job.tool}) is {job.state}. {follow}."
    return _text(text, {"job": job_id, "status": job.state, "location": f"/jobs/{job_id}"}, error=True)


def final_answer(job: Job) -> types.CallToolResult:
    """A decided job as the tool result the plain call would have given (or why it did not run)."""
    result = job.result
    if result is not None and result["status"] == 200:
        text, payload = result_answer(result)
        return _text(text, payload)
    if result is not None:
        return _text(result["text"], {"error": result["json"].get("type"), "message": result["text"]}, error=True)
    why = f" by {job.decided_by}" if job.decided_by else ""
    why += f": {job.reason}" if job.reason else ""
    why += f" ({job.error})" if job.error else ""
    text = f"job {job.id} ({job.tool}) was {job.state}{why}; the tool did not run."
    return _text(text, {"job": job.id, "status": job.state}, error=True)


class McpJobs:
    """Approval over MCP for one door; `service` is the door's ToolService (its `start_or_call` makes the job);
    `wait`: the seconds of one round (mcp_approval_round)."""

    def __init__(self, service: ToolService, wait: float = WAIT) -> None:
        self.service = service
        self.wait = wait

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
        if job.state == AWAITING and action in ("decline", "cancel"):
            try:
                job = await jobs.withdraw(identity, job_id, f"{WITHDRAWN} (declined)")
            except ToolrunError:
                job = await jobs.get(identity, job_id)
        return await self.follow(ctx, identity, job, first=False)

    async def follow(self, ctx: Any, identity: Identity, job: Job, first: bool = True) -> Any:
        """Wait for the job the way the client can: a 2026-07-28 client gets rounds held up to `wait` seconds each,
        a handshake-era client with elicitation gets questions, any other client the job to follow."""
        if getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
            return await self._round(ctx, identity, job, first)
        jobs = self.service.jobs
        owner = await _follower(jobs, identity, job)  # a held call is a job's stream by another door
        try:
            job = await jobs.wait(identity, job.id, FIRST if job.state == AWAITING else self.wait)
            if job.state == AWAITING:
                job = await self._ask(ctx, identity, job)
            elif job.state not in FINAL:
                job = await jobs.wait(identity, job.id, self.wait)
        finally:
            jobs.release(owner)
        if job.state in FINAL:
            return final_answer(job)
        return pending_answer(job)

    async def _round(self, ctx: Any, identity: Identity, job: Job, first: bool) -> Any:
        """One 2026-07-28 round: held up to `wait` seconds (the first only FIRST when the question can be shown),
        holding the request meanwhile; then the result, or `input_required` again. The question (an elicitation)
        goes only to a client that declared elicitation; any other gets a state-only round, which its driver
        retries at once. Between two rounds the request is held GRACE seconds: a client that gave up withdraws it."""
        elicits = _client_elicits(ctx)
        seconds = FIRST if first and elicits else self.wait
        job = await self._held_wait(ctx, identity, job, seconds)
        if job.state in FINAL:
            return final_answer(job)
        if job.state == AWAITING:
            await self.service.jobs.hold(identity, job.id, GRACE)
        state = STATE_PREFIX + job.id
        if job.state == AWAITING and elicits:
            form = types.ElicitRequestFormParams(message=question(job), requested_schema=EMPTY_FORM)
            return types.InputRequiredResult(
                input_requests={"approval": types.ElicitRequest(params=form)}, request_state=state
            )
        return types.InputRequiredResult(request_state=state)

    async def _held_wait(self, ctx: Any, identity: Identity, job: Job, seconds: float) -> Job:
        """Wait up to `seconds` for the job to leave its state, holding the request while it awaits approval. A
        client that goes away meanwhile (its connection lost, over HTTP; the request cancelled) withdraws it."""
        jobs = self.service.jobs
        scope = getattr(getattr(ctx, "request", None), "scope", None)
        owner = await _follower(jobs, identity, job)  # a held round is a job's stream by another door
        try:
            return await unless_gone(scope, self._poll(identity, job, seconds))
        except (asyncio.CancelledError, ClientGone):
            await _withdraw_shielded(jobs, identity, job.id)
            raise
        finally:
            jobs.release(owner)

    async def _poll(self, identity: Identity, job: Job, seconds: float) -> Job:
        jobs = self.service.jobs
        if job.state == AWAITING:
            await jobs.hold(identity, job.id, seconds + GRACE)
        deadline = time.monotonic() + seconds
        while True:
            job = await jobs.get(identity, job.id)
            if job.state in FINAL or time.monotonic() >= deadline:
                return job
            await asyncio.sleep(POLL)

    async def _ask(self, ctx: Any, identity: Identity, job: Job) -> Job:
        """A handshake-era client: ask it to wait (or withdraw) with `elicitation/create` where it declared
        elicitation and there is a channel back; the job as it stands after. A client that goes away withdraws."""
        session = getattr(ctx, "session", None)
        capabilities = getattr(session, "client_capabilities", None)
        if session is None or getattr(capabilities, "elicitation", None) is None or not session.can_send_request:
            return job
        jobs = self.service.jobs
        try:
            for _ in range(ROUNDS):
                await jobs.hold(identity, job.id, GRACE)  # the person may take a while to answer
                answer = await session.elicit_form(question(job), EMPTY_FORM)
                if answer.action != "accept":
                    withdrawn: Job = await jobs.withdraw(identity, job.id, f"{WITHDRAWN} (declined)")
                    return withdrawn
                job = await self._held_wait(ctx, identity, job, self.wait)
                if job.state != AWAITING:
                    ended: Job = await jobs.wait(identity, job.id, self.wait)
                    return ended
        except asyncio.CancelledError:
            await _withdraw_shielded(jobs, identity, job.id)
            raise
        except Exception:  # the channel back broke: the client is gone
            await _withdraw_shielded(jobs, identity, job.id)
            raise
        return job


def _client_elicits(ctx: Any) -> bool:
    """Whether the client of this request declared that it answers (form) elicitations: the capabilities of a
    2026-07-28 request's `_meta`, or of the connection."""
    capabilities = getattr(getattr(ctx, "session", None), "client_capabilities", None)
    if capabilities is not None:
        return getattr(capabilities, "elicitation", None) is not None
    meta = getattr(ctx, "meta", None)
    if meta is not None and not isinstance(meta, dict):
        meta = getattr(meta, "model_extra", None) or {}
    declared = meta.get(CAPABILITIES_KEY) if isinstance(meta, dict) else None
    if not isinstance(declared, dict):
        declared = getattr(declared, "model_dump", lambda **_: {})(by_alias=True) if declared is not None else {}
    return isinstance(declared, dict) and declared.get("elicitation") is not None


async def _follower(jobs: Jobs, identity: Identity, job: Job) -> str:
    """A place in the caller's share of waits on jobs (Jobs.follower). Past it the call is not waited on: its
    request awaiting approval is withdrawn, so nothing of a call answered with an error runs later unattended."""
    try:
        return str(jobs.follower(identity, "waits on jobs"))
    except CallerFull:
        if job.state == AWAITING:
            with contextlib.suppress(ToolrunError):
                await jobs.withdraw(identity, job.id, f"{WITHDRAWN} (over its share of waits on jobs)")
        raise


async def _withdraw_shielded(jobs: Jobs, identity: Identity, job_id: str) -> None:
    """The waiting client went away: withdraw its request, even while this task is being cancelled."""
    try:
        await asyncio.shield(jobs.withdraw(identity, job_id))
    except (ToolrunError, asyncio.CancelledError):
        pass
