"""Jobs: a call kept as a durable record, for calls a person must approve and calls that run long.

States and transitions (docs/jobs.md draws them)::

    awaiting_approval ──approve──► running ──► succeeded | failed | timed_out | cancelled
        │  deny ► denied
        │  approval_timeout passed, or the tool changed (reload) ► expired
        └  cancel ► cancelled

A tool with `approval: required` turns every call into a job awaiting approval; `async: true` (or a
caller asking for it) turns it into a running job answered at once. The record lives in the shared
state (toolrun.state), so any worker or replica can show, approve, deny or cancel it.

Rules kept here, for every door:
- a job is visible to its requester, to the tool's approvers and to admins; to anyone else it does
  not exist (the 404 of a hidden tool);
- the requester never approves its own call, whoever it is (admins included);
- the approval binds `digest`: the tool's definition and the validated parameters. A tool that
  changed since the request (a reload) turns its pending jobs `expired`; nothing else ever runs;
- the process that approves (or that accepts an async call) runs it and beats a heartbeat into the
  record; a running job whose heartbeat stopped (its worker died) becomes `failed` with the reason;
- a finished job is kept `job_retention` seconds, then dropped.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import params
from .access.audit import CallOrigin, audit_args
from .errors import Conflict, Forbidden, NotFound, RateLimited, ToolFailed, ToolrunError, Unauthorized
from .exec import executor, pidcache
from .jobrecord import (
    AWAITING,
    FINAL,
    RUNNING,
    STATES,
    OutputWatch,
    digest,
    error_record,
    identity_fields,
    is_approver,
    is_requester,
    new_job_id,
    outcome_of,
    requester_identity,
    result_record,
    visible,
)
from .models import CallResult, Identity, ToolSpec

if TYPE_CHECKING:
    from .service import ToolService
    from .state import JobStore

TRANSITIONS: dict[str, tuple[str, ...]] = {
    AWAITING: (RUNNING, "denied", "expired", "cancelled"),
    RUNNING: ("succeeded", "failed", "timed_out", "cancelled"),
}
HEARTBEAT = 1.0  # seconds between a runner's writes of heartbeat and output
STALE_AFTER = 15.0  # a running job whose heartbeat is older than this lost its worker
HOST = socket.gethostname()


class Jobs:
    """The jobs of one ToolService (`service.jobs`): every door reaches jobs through it."""

    def __init__(
        self,
        service: ToolService,
        store: JobStore,
        *,
        approval_timeout: float = 3600.0,
        retention: float = 86400.0,
    ) -> None:
        self.service = service
        self.store = store
        self.approval_timeout = approval_timeout
        self.retention = retention
        self.tasks: dict[str, asyncio.Task[None]] = {}  # jobs this process runs

    @classmethod
    def shared(cls, service: ToolService, settings: Any, access: Any = None) -> Jobs:
        """Jobs in the shared state of `settings`: the state file, or Redis with `redis_url` (toolrun.state)."""
        from .state import SharedState

        store = SharedState(settings, keys=access.store if access is not None else None).jobs()
        return cls(service, store, approval_timeout=settings.approval_timeout, retention=settings.job_retention)

    @property
    def runner(self) -> str:
        """This process, as a job's record names its runner (a forked worker is its own runner)."""
        return f"{HOST}:{pidcache.pid()}"

    # -- starting --------------------------------------------------------------------------------

    async def submit(
        self,
        identity: Identity,
        key: str,
        args: Mapping[str, Any] | None,
        *,
        origin: CallOrigin | None = None,
        as_json: bool = False,
    ) -> dict[str, Any]:
        """A new job for this call: awaiting approval, or running at once. Counts in the caller's rate bucket
        now (the run does not count again); a parameter error is the caller's error at once, as for any call."""
        service = self.service
        tool = service.registry.get(identity, key)
        if identity.anonymous:
            # A job is followed, approved and cancelled by who asked: an anonymous caller (a client address,
            # perhaps shared behind a proxy) is nobody in particular.
            raise Unauthorized("a call that becomes a job (approval, async) needs an API key")
        if service.limiter is not None:
            retry = await service.limiter.hit(identity.bucket, tool.key)
            if retry is not None:
                self._observe(tool.key, "rate_limited")
                raise RateLimited(tool.key, int(retry))
        try:
            values = params.validate(tool, args or {})
        except ToolrunError:
            self._observe(tool.key, "invalid")
            raise
        moment = time.time()
        origin = origin or CallOrigin()
        job: dict[str, Any] = {
            "id": new_job_id(),
            "tool": tool.key,
            "state": AWAITING if tool.approval else RUNNING,
            "requester": identity_fields(identity),
            "approvers": list(tool.approvers) if tool.approval else ["admin"],
            "args": values,
            "shown_args": audit_args(tool, values),
            "digest": digest(tool, values),
            "plan": self._plan(tool, values),
            "created": moment,
            "updated": moment,
            "expires_at": moment + (tool.approval_timeout or self.approval_timeout) if tool.approval else None,
            "door": origin.door,
            "request_id": origin.request_id,
            "as_json": as_json,
            "decided_by": None,
            "decided_at": None,
            "reason": None,
            "error": None,
            "result": None,
            "output": None,
            "runner": None,
            "heartbeat": None,
            "cancel": False,
            "finished": None,
        }
        if not tool.approval:
            job.update(runner=self.runner, heartbeat=moment, started=moment)
        await self.store.create(job)
        self._audit("job requested", job, None)
        if not tool.approval:
            self._start(job)
        return job

    def _observe(self, key: str, outcome: str) -> None:
        """A call refused before it became a job counts in the metrics as the same refusal of a plain call."""
        if self.service.observer is not None:
            self.service.observer.observe(key, outcome, 0.0)

    def _plan(self, tool: ToolSpec, values: Mapping[str, Any]) -> dict[str, Any] | None:
        """The dry run an approver reads: the command exactly as it will run, secrets as references."""
        admin = Identity(username="", groups=frozenset({"admin"}), anonymous=False)
        try:
            return self.service.plan(admin, tool.key, values)
        except ToolrunError as exc:
            return {"error": exc.summary}

    # -- reading ---------------------------------------------------------------------------------

    async def get(self, identity: Identity, job_id: str) -> dict[str, Any]:
        """The job, if this caller may see it; else NotFound, the same as an unknown id."""
        entry = await self._load(job_id)
        if entry is None or not visible(identity, entry[1]):
            raise NotFound(f"job {job_id[:64]}")
        return entry[1]

    async def list(self, identity: Identity, state: str | None = None) -> list[dict[str, Any]]:
        out = []
        for version, job in await self.store.all():
            refreshed = await self._refresh(job["id"], version, job)
            if refreshed is None or not visible(identity, refreshed[1]):
                continue
            if state is None or refreshed[1]["state"] == state:
                out.append(refreshed[1])
        out.sort(key=lambda j: j["created"], reverse=True)
        return out

    async def counts(self) -> dict[str, int]:
        """Jobs by state, for /metrics."""
        counts = dict.fromkeys(STATES, 0)
        for version, job in await self.store.all():
            refreshed = await self._refresh(job["id"], version, job)
            if refreshed is not None:
                counts[refreshed[1]["state"]] += 1
        return counts

    async def _load(self, job_id: str) -> tuple[int, dict[str, Any]] | None:
        if not job_id or len(job_id) > 64:
            return None
        entry = await self.store.get(job_id)
        if entry is None:
            return None
        return await self._refresh(job_id, *entry)

    async def _refresh(self, job_id: str, version: int, job: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """Apply what time decides: an approval deadline passed, a runner that stopped, a retention ended."""
        moment = time.time()
        if job["state"] in FINAL and job.get("finished") and moment - job["finished"] > self.retention:
            await self.store.delete(job_id)
            return None
        change: dict[str, Any] | None = None
        if job["state"] == AWAITING and job["expires_at"] is not None and moment >= job["expires_at"]:
            change = {"state": "expired", "error": "no decision within the approval timeout"}
        elif job["state"] == RUNNING and self._runner_gone(job, moment):
            change = {"state": "failed", "error": "the worker running it stopped (no heartbeat)"}
        if change is None:
            return version, job
        updated = await self._move(job_id, (job["state"],), change)
        if updated is None:
            entry = await self.store.get(job_id)
            return entry
        return updated

    def _runner_gone(self, job: Mapping[str, Any], moment: float) -> bool:
        if job["id"] in self.tasks:
            return False
        runner = job.get("runner") or ""
        host, _, pid = runner.rpartition(":")
        if host == HOST and pid.isdigit() and int(pid) != os.getpid():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                pass
        elif host == HOST and pid.isdigit() and int(pid) == os.getpid():
            return True  # this very process does not run it (it restarted with the same pid)
        return bool(job.get("heartbeat") is not None and moment - job["heartbeat"] > STALE_AFTER)

    async def _move(
        self, job_id: str, allowed: tuple[str, ...], change: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]] | None:
        """Apply `change` if the job is in one of `allowed` states (compare-and-set; retried on a race).
        None when it is not (another process decided first)."""
        for _ in range(50):
            entry = await self.store.get(job_id)
            if entry is None or entry[1]["state"] not in allowed:
                return None
            version, job = entry
            new = {**job, **change, "updated": time.time()}
            if new["state"] != job["state"] and new["state"] not in TRANSITIONS.get(job["state"], ()):
                raise AssertionError(f"no transition {job['state']} -> {new['state']}")
            if new["state"] in FINAL and job["state"] not in FINAL:
                new["finished"] = new["updated"]
                if new["state"] == "expired":  # decided by time or a reload: no door writes this record
                    self._audit("job expired", new, None)
            keep = self.retention if new["state"] in FINAL else None
            if await self.store.swap(job_id, version, new, keep):
                return version + 1, new
        raise Conflict(f"job {job_id}: too many concurrent changes")

    # -- deciding --------------------------------------------------------------------------------

    async def approve(self, identity: Identity, job_id: str, reason: str = "") -> dict[str, Any]:
        job = await self._decidable(identity, job_id)
        if is_requester(identity, job):
            raise Forbidden("the requester of a call cannot approve it")
        tool = self.service.lookup(job["tool"])
        if tool is None or digest(tool, job["args"]) != job["digest"]:
            await self._move(job_id, (AWAITING,), {"state": "expired", "error": "the tool changed since the request"})
            raise Conflict("the tool changed since the call was requested: the request expired")
        moment = time.time()
        change = {
            "state": RUNNING,
            "decided_by": identity.username,
            "decided_at": moment,
            "reason": reason or None,
            "runner": self.runner,
            "heartbeat": moment,
            "started": moment,
        }
        moved = await self._move(job_id, (AWAITING,), change)
        if moved is None:
            raise Conflict(f"job {job_id} was already decided")
        self._audit("job approved", moved[1], identity)
        self._start(moved[1])
        return moved[1]

    async def deny(self, identity: Identity, job_id: str, reason: str = "") -> dict[str, Any]:
        await self._decidable(identity, job_id)
        change = {"state": "denied", "decided_by": identity.username, "decided_at": time.time(), "reason": reason}
        moved = await self._move(job_id, (AWAITING,), change)
        if moved is None:
            raise Conflict(f"job {job_id} was already decided")
        self._audit("job denied", moved[1], identity)
        return moved[1]

    async def _decidable(self, identity: Identity, job_id: str) -> dict[str, Any]:
        job = await self.get(identity, job_id)
        if not is_approver(identity, job):
            raise Forbidden(f"only the approvers of {job['tool']} ({', '.join(job['approvers'])}) decide on it")
        if job["state"] != AWAITING:
            raise Conflict(f"job {job_id} is {job['state']}: there is nothing to decide")
        return job

    async def cancel(self, identity: Identity, job_id: str, reason: str = "") -> dict[str, Any]:
        """Cancel a job still waiting or running; a running one's processes are killed as on a timeout."""
        job = await self.get(identity, job_id)
        if job["state"] == AWAITING:
            change = {"state": "cancelled", "decided_by": identity.username, "reason": reason or None}
            moved = await self._move(job_id, (AWAITING,), change)
            if moved is not None:
                self._audit("job cancelled", moved[1], identity)
                return moved[1]
        elif job["state"] == RUNNING:
            await self._move(job_id, (RUNNING,), {"cancel": True, "reason": reason or None})
            task = self.tasks.get(job_id)
            if task is not None:
                task.cancel()
            self._audit("job cancelled", job, identity)
            return await self.wait(identity, job_id, 3.0)
        raise Conflict(f"job {job_id} is {job['state']}: it can no longer be cancelled")

    async def wait(self, identity: Identity, job_id: str, seconds: float, interval: float = 0.1) -> dict[str, Any]:
        """The job once it reaches a final state, or as it is after `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            job = await self.get(identity, job_id)
            if job["state"] in FINAL or time.monotonic() >= deadline:
                return job
            await asyncio.sleep(interval)

    async def expire_changed(self) -> int:
        """After a reload: pending jobs whose tool is gone or changed become `expired`. How many did."""
        count = 0
        for _version, job in await self.store.all():
            if job["state"] != AWAITING:
                continue
            tool = self.service.lookup(job["tool"])
            if tool is None or not tool.approval or digest(tool, job["args"]) != job["digest"]:
                change = {"state": "expired", "error": "the tool changed since the request (catalog reload)"}
                if await self._move(job["id"], (AWAITING,), change) is not None:
                    count += 1
        return count

    # -- running ---------------------------------------------------------------------------------

    def _start(self, job: dict[str, Any]) -> None:
        task = asyncio.get_running_loop().create_task(self._execute(job))
        self.tasks[job["id"]] = task
        task.add_done_callback(lambda _t: self.tasks.pop(job["id"], None))

    async def _execute(self, job: dict[str, Any]) -> None:
        watch = OutputWatch()
        token = executor.OUTPUT_WATCH.set(watch)
        try:
            call = asyncio.ensure_future(self._call(job))
        finally:
            executor.OUTPUT_WATCH.reset(token)
        cancelled = False
        try:
            while not call.done():
                await asyncio.wait({call}, timeout=HEARTBEAT)
                if call.done():
                    break
                change = {"heartbeat": time.time(), "output": watch.snapshot()}
                moved = await self._move(job["id"], (RUNNING,), change)
                if moved is not None and moved[1].get("cancel"):
                    cancelled = True
                    call.cancel()
        except asyncio.CancelledError:  # cancelled here (this process's cancel), or the server stops
            cancelled = cancelled or bool(await self._cancel_asked(job["id"]))
            call.cancel()
            if not cancelled:
                await self._finish(job["id"], {"state": "failed", "error": "the server stopped while it ran"})
                raise
        await asyncio.wait({call})
        await self._finish(job["id"], self._ending(call, cancelled))

    async def _cancel_asked(self, job_id: str) -> bool:
        entry = await self.store.get(job_id)
        return bool(entry and entry[1].get("cancel"))

    def _ending(self, call: asyncio.Future[CallResult], cancelled: bool) -> dict[str, Any]:
        if call.cancelled():
            return {"state": "cancelled", "error": "cancelled while it ran; its processes were killed"}
        exc = call.exception()
        if isinstance(exc, ToolrunError):
            return {"state": "failed", "error": exc.summary, "result": error_record(exc)}
        if exc is not None:
            failed = ToolFailed(exc)
            return {"state": "failed", "error": failed.summary, "result": error_record(failed)}
        result = call.result()
        return {"state": outcome_of(result), "result": result_record(result)}

    async def _finish(self, job_id: str, change: dict[str, Any]) -> None:
        await self._move(job_id, (RUNNING,), {**change, "output": None})

    async def _call(self, job: dict[str, Any]) -> CallResult:
        identity = requester_identity(job)
        origin = CallOrigin(job["door"], job["request_id"] or job["id"], job_id=job["id"])
        return await self.service.call(identity, job["tool"], job["args"], origin=origin, counted=True)

    async def stop(self) -> None:
        """The server stops: jobs this process runs are cancelled and marked failed with the reason."""
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- audit -----------------------------------------------------------------------------------

    def _audit(self, message: str, job: Mapping[str, Any], decider: Identity | None) -> None:
        audit = self.service.audit
        if audit is None:
            return
        requester = job["requester"]
        audit.write(
            {
                "job": job["id"],
                "event": message.removeprefix("job "),
                "tool": job["tool"],
                "user": requester["username"] or None,
                "client": requester["client"] or None,
                "door": job["door"],
                "request_id": job["request_id"] or None,
                "state": job["state"],
                "decider": decider.username if decider is not None else None,
                "reason": job.get("reason"),
                "digest": job["digest"],
                "args": job["shown_args"],
            },
            message,
        )


def memory_jobs() -> JobStore:
    from .state.memory import MemoryJobStore

    return MemoryJobStore()
