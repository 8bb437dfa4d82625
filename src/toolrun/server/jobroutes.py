"""The HTTP door's job routes (docs/jobs.md): GET /jobs, GET /jobs/{id}, GET /jobs/{id}/events and
POST /jobs/{id}/approve|deny|cancel. Every rule (who sees a job, who decides, what runs) is in
`service.jobs` (jobs.py); these handlers read the request and shape the answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..errors import UnsupportedMediaType, UsageError
from ..jobrecord import FINAL, STATES, WITHDRAWN, OutputDelta, check_reason, public_view
from ..jobs import PAGE_DEFAULT, PAGE_MAX
from ..models import Identity
from ..service import ToolService
from ..settings import Settings
from .request import head, int_param, is_json_media, parse_json_object, require_body, single

EVENT_INTERVAL = 0.25  # seconds between two looks at a followed job


async def _reason(request: Request, settings: Settings) -> str:
    """The optional `{"reason": "..."}` body of approve, deny and cancel (read as every body: request.read_body)."""
    given = head(request.scope)
    length = given.get(b"content-length")
    body = await require_body(request.receive, length, settings.max_body_bytes, settings.request_timeout)
    content_type = given.text(b"content-type") or ""
    if not body:
        return ""
    if not is_json_media(content_type):
        raise UnsupportedMediaType(content_type.split(";", 1)[0].strip().lower())
    data = parse_json_object(body)
    reason = data.get("reason", "")
    if not isinstance(reason, str) or len(reason) > 1000:
        raise UsageError("`reason` must be a string of at most 1000 characters")
    unknown = sorted(set(data) - {"reason"})
    if unknown:
        raise UsageError(f"unknown field {unknown[0]!r}: the body may hold `reason` only")
    return reason


class JobRoutes:
    """Handlers of the job rows of ROUTES: a row names one as `jobs.<method>` (app.Routes holds them as `jobs`)."""

    def __init__(self, service: ToolService, settings: Settings) -> None:
        self.service = service
        self.settings = settings

    async def list_jobs(self, request: Request, identity: Identity) -> Response:
        state = single(request, "status")
        if state is not None and state not in STATES:
            raise UsageError(f"status must be one of {', '.join(STATES)}")
        limit = int_param(request, "limit", PAGE_DEFAULT, 1, PAGE_MAX)
        cursor = single(request, "cursor")
        jobs, after = await self.service.jobs.list(identity, state, limit=limit, cursor=cursor)
        headers = {}
        if after is not None:
            query = urlencode({k: v for k, v in (("status", state), ("limit", limit), ("cursor", after)) if v})
            headers = {"X-Next-Cursor": after, "Link": f'</jobs?{query}>; rel="next"'}
        return JSONResponse([public_view(j, identity) for j in jobs], headers=headers)

    async def get_job(self, request: Request, identity: Identity) -> Response:
        job = await self.service.jobs.get(identity, request.path_params["id"])
        return JSONResponse(public_view(job, identity))

    async def approve_job(self, request: Request, identity: Identity) -> Response:
        reason = await _reason(request, self.settings)
        job = await self.service.jobs.approve(identity, request.path_params["id"], reason)
        return JSONResponse(public_view(job, identity))

    async def deny_job(self, request: Request, identity: Identity) -> Response:
        reason = await _reason(request, self.settings)
        job = await self.service.jobs.deny(identity, request.path_params["id"], reason)
        return JSONResponse(public_view(job, identity))

    async def cancel_job(self, request: Request, identity: Identity) -> Response:
        reason = await _reason(request, self.settings)
        job = await self.service.jobs.cancel(identity, request.path_params["id"], reason)
        return JSONResponse(public_view(job, identity))

    async def hold_job(self, request: Request, identity: Identity) -> Response:
        await _reason(request, self.settings)  # no body is needed; one that is given is checked as everywhere
        job = await self.service.jobs.hold(identity, request.path_params["id"])
        return JSONResponse(public_view(job, identity))

    async def withdraw_job(self, request: Request, identity: Identity) -> Response:
        reason = await _reason(request, self.settings)
        check_reason(reason)  # as approve, deny and cancel check theirs (in service.jobs)
        why = WITHDRAWN + (f" ({reason})" if reason else "")
        job = await self.service.jobs.withdraw(identity, request.path_params["id"], why)
        return JSONResponse(public_view(job, identity))

    async def job_events(self, request: Request, identity: Identity) -> Response:
        jobs = self.service.jobs
        job_id = request.path_params["id"]
        first = await jobs.get(identity, job_id)  # 404 before the stream starts
        owner = jobs.follower(identity)  # its share counts held MCP rounds too (mcp/approvals.py)

        async def events() -> AsyncIterator[bytes]:
            job, last = first, None
            delta = OutputDelta()  # each event carries the output that is new since the one before
            while True:
                if job.updated != last:
                    last = job.updated
                    view = job.view(identity)
                    output = delta.step(view.pop("output", None))
                    if output is not None:
                        view["output"] = output
                    yield f"event: job\ndata: {json.dumps(view, ensure_ascii=False)}\n\n".encode()
                if job.state in FINAL:
                    return
                await asyncio.sleep(EVENT_INTERVAL)
                job = await jobs.get(identity, job_id)

        return _HeldStream(jobs, owner, events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})


class _HeldStream(StreamingResponse):
    """An events stream that gives its place in the caller's share back when it ends, however it ends (the job
    finished, the client went away, the server stops)."""

    def __init__(self, jobs: Any, owner: str, content: AsyncIterator[bytes], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.jobs = jobs
        self.owner = owner

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.jobs.release(self.owner)


async def job_metrics(service: Any) -> bytes:
    """`svc_jobs{state=...}`: the jobs in the shared state by state (the whole server's, whichever worker answers)."""
    counts = await service.jobs.counts()
    lines = ["# HELP svc_jobs Jobs in the shared state, by state.", "# TYPE svc_jobs gauge"]
    lines += [f'svc_jobs{{state="{state}"}} {count}' for state, count in counts.items()]
    return ("\n".join(lines) + "\n").encode()
