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
- the approval binds `digest`: every field of the tool as it runs but its wording (jobrecord.WORDING)
  and the validated parameters, checked again when the run starts. A tool that changed in its own
  catalog file since the request (a reload) turns its pending jobs `expired`; another catalog (a local
  approver's ./tools.yaml) only refuses to decide; nothing else ever runs;
- the process that approves (or that accepts an async call) runs it and beats a heartbeat into the
  record, as a runner id of its own (host, pid, random); a running job whose heartbeat stopped (its
  worker died) becomes `failed` with the reason, and a runner whose heartbeat is refused stops its tool;
- text that no UTF-8 carries is refused before it is stored; secret arguments leave the record when
  the job ends; every change is an audit line saying what happened, to whom, by whom;
- a finished job is kept `job_retention` seconds, then dropped;
- one caller holds at most `max_live` jobs awaiting approval or running, and its running async jobs at most half
  the concurrency pool; a job's parameters are at most ARGS_MAX bytes (jobrecord caps what its result keeps);
- lists are pages (newest first, `limit` and an opaque cursor) and the sweep reads only what is due: the store
  keeps the indexes (toolrun.state), so no request reads every record.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from . import telemetry
from .access.audit import audit_args
from .errors import (
    CallerFull,
    Conflict,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ToolFailed,
    ToolrunError,
    Unauthorized,
    UsageError,
)
from .exec import executor, pidcache
from .jobrecord import (
    AWAITING,
    FINAL,
    RUNNING,
    STATES,
    WITHDRAWN,
    Job,
    OutputWatch,
    catalog_file,
    check_reason,
    check_text,
    digest,
    error_record,
    identity_fields,
    is_approver,
    is_requester,
    may_be_requester,
    new_job_id,
    outcome_of,
    result_record,
    scrubbed_args,
    visible,
)
from .models import CallOrigin, CallResult, Identity, ToolSpec
from .telemetry.notify import Notifier

if TYPE_CHECKING:
    from .access.audit import AuditLog
    from .registry import Registry
    from .state import JobStore
    from .state.kinds import Slots

TRANSITIONS: dict[str, tuple[str, ...]] = {
    AWAITING: (RUNNING, "denied", "expired", "cancelled"),
    RUNNING: ("succeeded", "failed", "timed_out", "cancelled"),
}
log = logging.getLogger(__name__)
HEARTBEAT = 1.0  # seconds between a runner's writes of heartbeat and output
HOLD = 10.0  # seconds a waiting requester's hold lasts; its client renews it while it waits (`hold`)
SYSTEM = "toolrun"  # `by` of an audit line for what time, a reload or a runner decided, not a person
STALE_AFTER = 15.0  # a running job whose heartbeat is older than this lost its worker
HOST = socket.gethostname()
_RUNNER: tuple[int, str] = (0, "")  # (pid, runner id) of this process: a forked worker draws its own


def runner_id() -> str:
    """This process as a job's runner: host, pid and 48 random bits. Host and pid alone collide: two containers
    with the host's network (one hostname), each its server as PID 1, would take each other's jobs for their own."""
    global _RUNNER
    pid = pidcache.pid()
    if _RUNNER[0] != pid:
        _RUNNER = (pid, f"{HOST}:{pid}:{secrets.token_hex(6)}")
    return _RUNNER[1]


def _read_space() -> str:
    """The kernel boot and PID namespace this process lives in: a pid means the same process only in the same one."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


PID_SPACE = _read_space()  # the same in a forked worker (a fork stays in its namespace)
ARGS_MAX = 64 * 1024  # bytes of a job's validated parameters (as JSON): a call past it is a 413
PAGE_DEFAULT = 100  # jobs in one page of GET /jobs (and `toolrun jobs list`) when `limit` is not given
PAGE_MAX = 1000  # the largest `limit`


def encode_cursor(job: Job) -> str:
    """The opaque cursor of the page that follows `job` (newest first)."""
    text = json.dumps([job.created, job.id], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """A cursor `encode_cursor` made, or a UsageError naming the parameter."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, job_id = json.loads(raw)
        if isinstance(created, bool) or not isinstance(created, int | float) or not isinstance(job_id, str):
            raise ValueError(cursor)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise UsageError("`cursor` is not a cursor this server gave (take it from the previous page)") from None
    return float(created), job_id


def _position(record: Any, previous: tuple[float, str] | None) -> tuple[float, str] | None:
    """Where a record stands in newest-first order (as the store's index orders it: jobindex.columns), so a page
    goes on after a damaged record too; `previous` when the record does not say."""
    try:
        created, job_id = float(record.get("created") or 0.0), record["id"]
    except (AttributeError, KeyError, TypeError, ValueError):
        return previous
    return (created, job_id) if isinstance(job_id, str) else previous


class CallObserver(Protocol):
    def observe(self, key: str, outcome: str, seconds: float) -> None: ...


class JobHost(Protocol):
    """What the jobs ask of the service that runs them (service.ToolService): the tools, the one admission of a
    call, the dry run an approver reads, the call itself, and where outcomes are counted and audited. The jobs
    never import the service: it makes them, and passes itself as their host."""

    @property
    def registry(self) -> Registry: ...

    @property
    def slots(self) -> Slots: ...

    @property
    def observer(self) -> CallObserver | None: ...

    @property
    def audit(self) -> AuditLog | None: ...

    def lookup(self, key: str) -> ToolSpec | None: ...

    def plan(self, identity: Identity, key: str, args: Mapping[str, Any]) -> dict[str, Any]: ...

    async def admit(
        self, identity: Identity, tool: ToolSpec, args: Mapping[str, Any] | None, *, counted: bool = False
    ) -> dict[str, Any]: ...

    async def call(
        self,
        identity: Identity,
        key: str,
        args: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        origin: CallOrigin | None = None,
        counted: bool = False,
        approved: str | None = None,
        salt: str = "",
    ) -> CallResult: ...


class Jobs:
    """The jobs of one ToolService (`service.jobs`): every door reaches jobs through it."""

    def __init__(
        self,
        host: JobHost,
        store: JobStore,
        *,
        approval_timeout: float = 3600.0,
        retention: float = 86400.0,
        notifier: Notifier | None = None,
        max_live: int = 100,
        max_followers: int = 10,
    ) -> None:
        self.host = host
        self.store = store
        self.approval_timeout = approval_timeout
        self.retention = retention
        self.notifier = notifier or Notifier()  # a tool's own `notify:` hooks are told even without the setting
        self.max_live = max_live
        # One caller's open waits on jobs in this process (GET /jobs/{id}/events streams and held MCP rounds): at
        # most `max_followers` (job_max_streams_per_caller), whichever door opens them (`follower`).
        self.max_followers = max_followers
        self.followers: dict[str, int] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}  # jobs this process runs
        # Records of jobs cancelled before they started, by job id: this process still ends them (`_runner_gone`).
        self.settling: dict[str, asyncio.Task[None]] = {}
        self.key_store: Callable[[], Any] | None = None  # the key store, to check a requester's key before a run
        # Whether this process serves its catalog (a server: mounts.mount_jobs). Only a server expires a job whose
        # tool changed; a local `toolrun jobs approve` (its own settings and environment, which resolve a tool's
        # sandbox and ${VAR}s their way) refuses to decide instead, and the server's reload expires it.
        self.serves_catalog = False

    @classmethod
    def shared(cls, host: JobHost, settings: Any, access: Any = None) -> Jobs:
        """Jobs in the shared state of `settings`: the state file, or Redis with `redis_url` (toolrun.state)."""
        from .state import SharedState

        shared = SharedState(settings, keys=access.store if access is not None else None)
        jobs = cls(
            host,
            shared.jobs(),
            approval_timeout=settings.approval_timeout,
            retention=settings.job_retention,
            notifier=Notifier.from_settings(settings),
            max_live=settings.job_max_live_per_caller,
            max_followers=settings.job_max_streams_per_caller,
        )
        jobs.key_store = shared.keys
        return jobs

    @property
    def runner(self) -> str:
        """This process, as a job's record names its runner (a forked worker is its own runner): runner_id."""
        return runner_id()

    # -- starting --------------------------------------------------------------------------------

    async def submit(
        self,
        identity: Identity,
        key: str,
        args: Mapping[str, Any] | None,
        *,
        origin: CallOrigin | None = None,
        as_json: bool = False,
        hold: float | None = None,
    ) -> Job:
        """A new job for this call: awaiting approval, or running at once. Counts in the caller's rate bucket
        now (the run does not count again); a parameter error is the caller's error at once, as for any call.

        `hold`: the caller waits for the decision, holding the request for that many seconds and renewing it
        (`hold`) while it waits; a hold that lapses (the caller went away) withdraws the request. None: the
        caller chose not to wait, and the job stays until it is decided or expires."""
        tool = self.host.registry.get(identity, key)
        if identity.anonymous:
            # A job is followed, approved and cancelled by who asked: an anonymous caller (a client address,
            # perhaps shared behind a proxy) is nobody in particular.
            raise Unauthorized("a call that becomes a job (approval, async) needs an API key")
        try:
            values = await self.host.admit(identity, tool, args)  # the rate bucket and the parameters, as any call
            for name, value in values.items():
                check_text(value, name)
            check_text(identity_fields(identity), "requester")  # a token's subject, say: it is stored too
        except ToolrunError as exc:
            self._observe(tool.key, "rate_limited" if isinstance(exc, RateLimited) else "invalid")
            raise
        await self._within_share(identity, tool, values)
        moment = time.time()
        origin = origin or CallOrigin()
        salt = secrets.token_hex(16)  # the digest's key: jobrecord.digest
        job = Job(
            id=new_job_id(),
            tool=tool.key,
            state=AWAITING if tool.approval else RUNNING,
            requester=identity,
            approvers=tuple(tool.approvers) if tool.approval else ("admin",),
            args=values,
            secrets=tuple(sorted(tool.secret_names & set(values))),  # scrubbed from `args` when the job ends
            shown_args=audit_args(tool, values),
            digest=digest(tool, values, salt),
            salt=salt,
            catalog=catalog_file(tool),
            plan=self._plan(tool, values),
            created=moment,
            updated=moment,
            expires_at=moment + (tool.approval_timeout or self.approval_timeout) if tool.approval else None,
            door=origin.door,
            request_id=origin.request_id,
            trace=telemetry.current_traceparent(),  # the requester's span: the run links to it
            as_json=as_json,
            hold_until=moment + hold if hold is not None and tool.approval else None,
        )
        if not tool.approval:
            job = dataclasses.replace(job, runner=self.runner, runner_space=PID_SPACE, heartbeat=moment, started=moment)
        await self.store.create(job.to_record())
        await self._still_within_share(identity, tool, job.id)
        self._audit("job requested", job, identity, None)
        if not tool.approval:
            self._start(job)
        return job

    async def _still_within_share(self, identity: Identity, tool: ToolSpec, job_id: str) -> None:
        """Count the caller's live jobs again now that the new one exists, and take it back when it is one too many.
        The count before it (`_within_share`) does not hold against requests sent at once: each counted before any
        was created (30 at once all passed a cap of 3). Counted after, every job kept saw every job kept before it,
        so no more than the cap are ever kept; requests racing past the cap may all be refused, never all kept."""
        try:
            await self._within_share(identity, tool, {}, made=1)
        except CallerFull:
            await self.store.delete(job_id)
            raise

    async def _within_share(self, identity: Identity, tool: ToolSpec, values: Mapping[str, Any], made: int = 0) -> None:
        """What one record and one caller may hold: parameters of at most ARGS_MAX bytes, at most `max_live` jobs
        awaiting approval or running, and running async jobs on at most half the concurrency pool (so that the
        async calls of a client that went away never hold every slot)."""
        size = len(json.dumps(values, default=str, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > ARGS_MAX:
            self._observe(tool.key, "invalid")
            raise PayloadTooLarge(ARGS_MAX, f"the JSON of the parameters of a call that becomes a job ({size} bytes)")
        live = await self.store.live(identity.person)
        if made:  # the new job itself is among them (awaiting approval, or running for an async call)
            live[AWAITING if tool.approval else RUNNING] -= made
        if sum(live.values()) >= self.max_live:
            self._observe(tool.key, "rate_limited")
            raise CallerFull(
                f"{identity.username} already holds {sum(live.values())} jobs awaiting approval or running "
                f"(at most {self.max_live} per caller): wait for one to end, or cancel one"
            )
        cap = self.host.slots.cap
        share = max(1, cap // 2) if cap is not None else None
        if not tool.approval and share is not None and live[RUNNING] >= share:
            self._observe(tool.key, "rate_limited")
            raise CallerFull(
                f"{identity.username} already has {live[RUNNING]} async jobs running (at most {share} per caller, "
                f"half of max_concurrent_calls): wait for one to end, or cancel one"
            )

    def follower(self, identity: Identity, what: str = "job event streams") -> str:
        """Count one more open wait of this caller on a job (an events stream, a held MCP round), or CallerFull
        past its share: the caller's key (`release` gives the place back)."""
        owner = identity.bucket  # the person (a key user and a token subject of one name are two callers)
        held = self.followers.get(owner, 0)
        if held >= self.max_followers:
            raise CallerFull(
                f"too many open {what} for this caller (event streams and held MCP rounds count together, at "
                f"most {self.max_followers} per caller): close one first"
            )
        self.followers[owner] = held + 1
        return owner

    def release(self, owner: str) -> None:
        held = self.followers.get(owner, 0) - 1
        if held > 0:
            self.followers[owner] = held
        else:
            self.followers.pop(owner, None)

    def _observe(self, key: str, outcome: str) -> None:
        """A call refused before it became a job counts in the metrics as the same refusal of a plain call."""
        if self.host.observer is not None:
            self.host.observer.observe(key, outcome, 0.0)

    def _plan(self, tool: ToolSpec, values: Mapping[str, Any]) -> dict[str, Any] | None:
        """The dry run an approver reads: the command exactly as it will run, secrets as references."""
        admin = Identity(username="", groups=frozenset({"admin"}), anonymous=False)
        try:
            return self.host.plan(admin, tool.key, values)
        except ToolrunError as exc:
            return {"error": exc.summary}

    # -- reading ---------------------------------------------------------------------------------

    async def get(self, identity: Identity, job_id: str) -> Job:
        """The job, if this caller may see it; else NotFound, the same as an unknown id."""
        entry = await self._load(job_id)
        if entry is None or not visible(identity, entry[1]):
            raise NotFound(f"job {job_id[:64]}")
        return entry[1]

    async def list(
        self, identity: Identity, state: str | None = None, *, limit: int = PAGE_DEFAULT, cursor: str | None = None
    ) -> tuple[list[Job], str | None]:
        """One page of the jobs this caller may see, newest first: (jobs, the cursor of the next page or None).
        Only the jobs of the page are read (the store's indexes choose them)."""
        if identity.anonymous:
            return [], None
        after = decode_cursor(cursor) if cursor else None
        viewer = None if identity.is_admin else identity
        out: list[Job] = []
        want = limit + 1  # one more than the page: whether a next page exists
        while len(out) < want:
            batch = await self.store.page(state=state, viewer=viewer, before=after, limit=want)
            start = after
            for version, record in batch:
                after = _position(record, after)
                job = Job.from_record(record)
                if job is None:  # a damaged record is left out; it never breaks the list
                    continue
                refreshed = await self._refresh(job.id, version, job)
                if refreshed is None or not visible(identity, refreshed[1]):
                    continue
                if state is None or refreshed[1].state == state:
                    out.append(refreshed[1])
            if len(batch) < want or after == start:
                break
        page = out[:limit]
        return page, (encode_cursor(page[-1]) if len(out) > limit else None)

    async def counts(self) -> dict[str, int]:
        """Jobs by state, for /metrics: counted by the store's index, as the last sweep (`sweep`) left them."""
        counted = await self.store.counts()
        return {state: counted.get(state, 0) for state in STATES}

    async def sweep(self) -> None:
        """What time decides, on the jobs it is due for only (an approval deadline passed, a heartbeat late), and
        the jobs whose retention ended dropped (the store reclaims their space). Every server runs it every 5 s."""
        moment = time.time()
        for version, record in await self.store.due(moment, moment - 2 * HEARTBEAT):
            job = Job.from_record(record)
            if job is not None:
                await self._refresh(job.id, version, job)
        await self.store.purge(moment - self.retention)

    async def _entry(self, job_id: str) -> tuple[int, Job] | None:
        """The stored job and its version; None when there is none, or a damaged or foreign record."""
        entry = await self.store.get(job_id)
        job = Job.from_record(entry[1]) if entry is not None else None
        return None if entry is None or job is None else (entry[0], job)

    async def _load(self, job_id: str) -> tuple[int, Job] | None:
        if not job_id or len(job_id) > 64:
            return None
        entry = await self._entry(job_id)
        if entry is None:
            return None
        return await self._refresh(job_id, *entry)

    async def _refresh(self, job_id: str, version: int, job: Job) -> tuple[int, Job] | None:
        """Apply what time decides: an approval deadline passed, a runner that stopped, a retention ended."""
        moment = time.time()
        if job.state in FINAL and job.finished and moment - job.finished > self.retention:
            await self.store.delete(job_id)
            return None
        change: dict[str, Any] | None = None
        if job.state == AWAITING and job.hold_until is not None and moment >= job.hold_until:
            change = self._withdrawal(job)
        elif job.state == AWAITING and job.expires_at is not None and moment >= job.expires_at:
            change = {"state": "expired", "error": "no decision within the approval timeout"}
        elif job.state == RUNNING and self._runner_gone(job, moment):
            change = {"state": "failed", "error": "the worker running it stopped (no heartbeat)"}
        if change is None:
            return version, job
        updated = await self._move(job_id, (job.state,), change)
        if updated is not None and change.get("withdrawn"):  # a hold that lapsed: no door writes this record
            self._audit("job cancelled", updated[1], SYSTEM, updated[1].reason)
        if updated is None:
            return await self._entry(job_id)
        if updated[1].state == "failed":
            self._audit("job failed", updated[1], SYSTEM, updated[1].error)
        return updated

    def _runner_gone(self, job: Job, moment: float) -> bool:
        if job.id in self.tasks or job.id in self.settling:  # this process runs it, or writes how it ended
            return False
        runner = job.runner or ""
        if runner == self.runner:
            return True  # named as this process's, yet this process does not run it
        pid = runner.split(":")[-2] if runner.count(":") >= 2 else ""
        if PID_SPACE and job.runner_space == PID_SPACE and pid.isdigit():
            # The same kernel and PID namespace: the pid is that process, or nobody's.
            if int(pid) == pidcache.pid():
                return True  # this pid is now this process: the runner was an earlier one (a restart)
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                pass
        # Elsewhere (another machine, container or PID namespace): only its heartbeat tells.
        return bool(job.heartbeat is not None and moment - job.heartbeat > STALE_AFTER)

    async def _move(
        self, job_id: str, allowed: tuple[str, ...], change: Mapping[str, Any], runner: str | None = None
    ) -> tuple[int, Job] | None:
        """Apply `change` if the job is in one of `allowed` states (compare-and-set; retried on a race), and, with
        `runner`, still run by that runner. None when it is not (another process decided first)."""
        for _ in range(50):
            entry = await self._entry(job_id)
            if entry is None or entry[1].state not in allowed:
                return None
            if runner is not None and entry[1].runner != runner:
                return None
            version, job = entry
            new = dataclasses.replace(job, **change, updated=time.time())
            if new.state != job.state and new.state not in TRANSITIONS.get(job.state, ()):
                raise AssertionError(f"no transition {job.state} -> {new.state}")
            if new.state in FINAL and job.state not in FINAL:
                # nothing runs from it any more: its secrets go, and its digest can no longer be recomputed
                new = dataclasses.replace(new, finished=new.updated, args=scrubbed_args(new), salt=None)
                if new.state == "expired":  # decided by time or a reload: no door writes this record
                    self._audit("job expired", new, SYSTEM, new.error)
            keep = self.retention if new.state in FINAL else None
            if await self.store.swap(job_id, version, new.to_record(), keep):
                return version + 1, new
        raise Conflict(f"job {job_id}: too many concurrent changes")

    # -- deciding --------------------------------------------------------------------------------

    async def approve(self, identity: Identity, job_id: str, reason: str = "") -> Job:
        check_reason(reason)
        job = await self._decidable(identity, job_id)
        tool = self.host.lookup(job.tool)
        if tool is None or digest(tool, job.args, job.salt or "") != job.digest:
            if not self._tool_changed(tool, job):
                raise Conflict(
                    f"{job.tool} as this process loads it is not the tool requested (from "
                    f"{job.catalog or 'another catalog'}): approve it where that catalog is loaded; "
                    "the job still awaits its decision"
                )
            await self._move(job_id, (AWAITING,), {"state": "expired", "error": "the tool changed since the request"})
            raise Conflict("the tool changed since the call was requested: the request expired")
        requester = await self._requester_now(job)
        if not isinstance(requester, str) and tool is not None and not requester.can_access(tool):
            requester = f"withdrawn: the requester may no longer call {job.tool} (its groups changed)"
        if isinstance(requester, str):
            moved = await self._move(job_id, (AWAITING,), self._withdrawal(job, requester))
            if moved is not None:
                self._audit("job cancelled", moved[1], SYSTEM, requester)
            raise Conflict(f"job {job_id} was {requester}: nothing runs")
        moment = time.time()
        change = {
            "requester": requester,  # its groups as they are now, not as they were
            "state": RUNNING,
            "decided_by": identity.username,
            "decided_at": moment,
            "reason": reason or None,
            "runner": self.runner,
            "runner_space": PID_SPACE,
            "heartbeat": moment,
            "started": moment,
        }
        moved = await self._move(job_id, (AWAITING,), change)
        if moved is None:
            raise Conflict(f"job {job_id} was already decided")
        self._audit("job approved", moved[1], identity, reason or None)
        self._start(moved[1])
        return moved[1]

    async def _requester_now(self, job: Job) -> Identity | str:
        """The requester as it is now: an API-key requester's key must still be active and its user still exist
        (its groups today, not when it asked); else why the request is withdrawn. Tokens and the local operator
        are taken as they were (a token cannot be asked again)."""
        r = job.requester
        if r.source != "key" or self.key_store is None:
            return r
        store = self.key_store()
        user = next((u for u in await store.alist_users() if u.username == r.username), None)
        if user is None:
            return "withdrawn: the requester's user was deleted"
        records = await store.alist_keys()
        record = next((k for k in records if k.prefix == r.key_prefix), None)
        if record is None or record.state() != "active":
            return "withdrawn: the requester's API key was revoked or expired"
        return user.identity(r.client, r.key_prefix)  # type: ignore[no-any-return]

    async def deny(self, identity: Identity, job_id: str, reason: str = "") -> Job:
        check_reason(reason)
        await self._decidable(identity, job_id)
        change = {"state": "denied", "decided_by": identity.username, "decided_at": time.time(), "reason": reason}
        moved = await self._move(job_id, (AWAITING,), change)
        if moved is None:
            raise Conflict(f"job {job_id} was already decided")
        self._audit("job denied", moved[1], identity, reason or None)
        return moved[1]

    async def _decidable(self, identity: Identity, job_id: str) -> Job:
        job = await self.get(identity, job_id)
        if not is_approver(identity, job):
            raise Forbidden(f"only the approvers of {job.tool} ({', '.join(job.approvers)}) decide on it")
        if may_be_requester(identity, job):
            # Approve and deny alike: the requester may withdraw its call (cancel), never decide it.
            raise Forbidden("the requester of a call cannot decide it (approve or deny); it may withdraw it (cancel)")
        if job.state != AWAITING:
            raise Conflict(f"job {job_id} is {job.state}: there is nothing to decide")
        return job

    async def cancel(self, identity: Identity, job_id: str, reason: str = "") -> Job:
        """Cancel a job still waiting or running; a running one's processes are killed as on a timeout. A job that
        moved meanwhile (approved while its requester withdrew it) is looked at again, as it is now."""
        check_reason(reason)
        for _ in range(3):
            job = await self.get(identity, job_id)
            if job.state == AWAITING:
                done = await self._cancel_waiting(identity, job_id, reason)
            elif job.state == RUNNING:
                done = await self._ask_cancel(identity, job_id, reason)
            else:
                break
            if done is not None:
                return done
        raise Conflict(f"job {job_id} is {job.state}: it can no longer be cancelled")

    @staticmethod
    def _withdrawal(job: Job, reason: str = WITHDRAWN) -> dict[str, Any]:
        return {
            "state": "cancelled",
            "withdrawn": True,
            "decided_by": job.requester.username or None,
            "decided_at": time.time(),
            "reason": reason,
            "hold_until": None,
        }

    async def hold(self, identity: Identity, job_id: str, seconds: float = HOLD) -> Job:
        """The requester is still waiting: its hold on a request awaiting approval lasts `seconds` more. Only the
        requester holds its request (403 for its approvers); a job in any other state is answered as it is."""
        job = await self.get(identity, job_id)
        if not is_requester(identity, job):
            raise Forbidden("only the requester of a call waits on it (hold)")
        if job.state == AWAITING:
            moved = await self._move(job_id, (AWAITING,), {"hold_until": time.time() + seconds})
            if moved is not None:
                return moved[1]
            job = await self.get(identity, job_id)
        return job

    async def withdraw(self, identity: Identity, job_id: str, reason: str = WITHDRAWN) -> Job:
        """The waiting requester went away (Ctrl-C, a kill, the UI's Cancel, an MCP client that gave up): its
        request awaiting approval is cancelled with `reason`, and a job already running is cancelled as by
        `cancel`. A job in a final state is answered as it is. `reason` is checked as any reason (the words a
        caller added after WITHDRAWN): an escape sequence would reach the approvers' terminals."""
        check_reason(reason.removeprefix(WITHDRAWN).removeprefix(" (").removesuffix(")"))
        job = await self.get(identity, job_id)
        if not is_requester(identity, job):
            raise Forbidden("only the requester of a call withdraws it")
        if job.state == AWAITING:
            moved = await self._move(job_id, (AWAITING,), self._withdrawal(job, reason))
            if moved is not None:
                self._audit("job cancelled", moved[1], identity, reason)
                return moved[1]
            job = await self.get(identity, job_id)
        if job.state == RUNNING:
            try:
                return await self.cancel(identity, job_id, reason)
            except Conflict:  # it ended meanwhile (a cancel answers 409 then): a withdrawal answers it as it is
                job = await self.get(identity, job_id)
                if job.state not in FINAL:
                    raise
        return job

    async def _cancel_waiting(self, identity: Identity, job_id: str, reason: str) -> Job | None:
        change = {"state": "cancelled", "decided_by": identity.username, "reason": reason or None}
        moved = await self._move(job_id, (AWAITING,), change)
        if moved is None:
            return None
        self._audit("job cancelled", moved[1], identity, reason or None)
        return moved[1]

    async def _ask_cancel(self, identity: Identity, job_id: str, reason: str) -> Job | None:
        # Only asked here: the runner ends it, and the trail records how it really ended (a run that finished
        # before the runner saw the request ends `succeeded`, not `cancelled`).
        asked = {"cancel": True, "cancelled_by": identity.username, "cancel_reason": reason or None}
        moved = await self._move(job_id, (RUNNING,), asked)
        if moved is None:
            return None
        self._audit("job cancel requested", moved[1], identity, reason or None)
        task = self.tasks.get(job_id)
        if task is not None:
            task.cancel()
        return await self.wait(identity, job_id, 3.0)

    async def wait(self, identity: Identity, job_id: str, seconds: float, interval: float = 0.1) -> Job:
        """The job once it reaches a final state, or as it is after `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            job = await self.get(identity, job_id)
            if job.state in FINAL or time.monotonic() >= deadline:
                return job
            await asyncio.sleep(interval)

    async def expire_changed(self) -> int:
        """After a reload: pending jobs whose tool is gone or changed become `expired`. How many did."""
        count = 0
        pending: list[Job] = []
        after: tuple[float, str] | None = None
        while batch := await self.store.page(state=AWAITING, viewer=None, before=after, limit=PAGE_MAX):
            pending += [job for _version, record in batch if (job := Job.from_record(record)) is not None]
            start, after = after, _position(batch[-1][1], after)
            if after == start:
                break
        for job in pending:
            tool = self.host.lookup(job.tool)
            if tool is None or not tool.approval or digest(tool, job.args, job.salt or "") != job.digest:
                if not self._tool_changed(tool, job):
                    continue
                change = {"state": "expired", "error": "the tool changed since the request (catalog reload)"}
                if await self._move(job.id, (AWAITING,), change) is not None:
                    count += 1
        return count

    def _tool_changed(self, tool: ToolSpec | None, job: Job) -> bool:
        """Whether this server's catalog holds the job's tool changed (or removed from its file), rather than
        another catalog: only a server that loads the catalog file the job was requested from expires it (a
        local `toolrun jobs approve`, where ./tools.yaml may be another catalog, never does)."""
        requested = job.catalog
        if not self.serves_catalog:
            return False
        if not requested:  # a record from before the catalog was kept: as before, any difference expires it
            return True
        if tool is not None:
            return bool(catalog_file(tool) == requested)
        files = {t.file for t in self.host.registry.tools.values()}
        return requested in {os.path.realpath(f) for f in files if f}

    # -- running ---------------------------------------------------------------------------------

    def _start(self, job: Job) -> None:
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._execute(job))
        self.tasks[job.id] = task

        def done(finished: asyncio.Task[None]) -> None:
            self.tasks.pop(job.id, None)
            if finished.cancelled():
                # Cancelled before its first step (a cancel or a withdrawal racing the approval): `_execute` never
                # ran, so nothing wrote how it ended; settle the record here (a no-op when it did end).
                settling = loop.create_task(self._settle(job.id))
                self.settling[job.id] = settling
                settling.add_done_callback(lambda _: self.settling.pop(job.id, None))

        task.add_done_callback(done)

    async def _settle(self, job_id: str) -> None:
        asked = await self._cancel_asked(job_id)
        ending = {"state": "cancelled", "error": "cancelled before it started; nothing ran"} if asked else None
        await self._finish(job_id, ending or {"state": "failed", "error": "the server stopped while it ran"}, None)

    async def _execute(self, job: Job) -> None:
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
                moved = await self._move(job.id, (RUNNING,), change, runner=job.runner)
                if moved is None:
                    # The record is no longer this runner's running job (another process declared it failed, or
                    # dropped it): nobody follows this run any more, so it stops, and the record is left as it is.
                    log.warning("job %s: its record is no longer this runner's; stopping its tool", job.id)
                    call.cancel()
                    await asyncio.wait({call})
                    return
                if moved[1].cancel:
                    cancelled = True
                    call.cancel()
        except asyncio.CancelledError:  # cancelled here (this process's cancel), or the server stops
            cancelled = cancelled or bool(await self._cancel_asked(job.id))
            call.cancel()
            if not cancelled:
                ending = {"state": "failed", "error": "the server stopped while it ran"}
                await self._finish(job.id, ending, watch.snapshot())
                raise
        await asyncio.wait({call})
        await self._finish(job.id, self._ending(call, cancelled), watch.snapshot())

    async def _cancel_asked(self, job_id: str) -> bool:
        entry = await self._entry(job_id)
        return bool(entry and entry[1].cancel)

    def _ending(self, call: asyncio.Future[CallResult], cancelled: bool) -> dict[str, Any]:
        if call.cancelled():
            return {"state": "cancelled", "error": "cancelled while it ran; its processes were killed"}
        exc = call.exception()
        if isinstance(exc, ToolrunError):
            record = error_record(exc)
            return {"state": "failed", "error": record["text"], "result": record}
        if exc is not None:
            failed = ToolFailed(exc)
            return {"state": "failed", "error": failed.summary, "result": error_record(failed)}
        result = call.result()
        return {"state": outcome_of(result), "result": result_record(result)}

    async def _finish(self, job_id: str, change: dict[str, Any], output: dict[str, Any] | None) -> None:
        """End a running job; it keeps the head and tail of what it printed (a cancelled job's only output)."""
        moved = await self._move(job_id, (RUNNING,), {**change, "output": output}, runner=runner_id())
        if moved is not None:
            ended = moved[1]
            by = ended.cancelled_by if ended.state == "cancelled" else None
            reason = ended.cancel_reason if ended.state == "cancelled" else None
            self._audit(f"job {ended.state}", ended, by or SYSTEM, reason or ended.error)

    async def _call(self, job: Job) -> CallResult:
        identity = job.requester
        origin = CallOrigin(job.door, job.request_id or job.id, job_id=job.id, link=job.trace or "")
        approved = job.digest if job.decided_by else None  # an async job was approved by nobody
        return await self.host.call(
            identity,
            job.tool,
            job.args,
            origin=origin,
            counted=True,
            approved=approved,
            salt=job.salt or "",
        )

    async def stop(self) -> None:
        """The server stops: jobs this process runs are cancelled and marked failed with the reason."""
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.notifier.drain(2.0)  # notifications on their way get a moment, not the whole backoff

    # -- audit -----------------------------------------------------------------------------------

    def _audit(self, message: str, job: Job, by: Identity | str, reason: str | None) -> None:
        """One line of the trail: what happened (`event`, `state`), to whom (`user`, the requester, and the job),
        by whom (`by`: a person, or `toolrun` for what time or the runner decided) and why (`reason`); the
        approvers' webhooks are told too (`_notify`)."""
        decider = by if isinstance(by, Identity) else None
        by = by.username if isinstance(by, Identity) else by
        self._notify(message.removeprefix("job "), job, decider, None if by == SYSTEM else by)
        audit = self.host.audit
        if audit is None:
            return
        requester = job.requester
        event = message.removeprefix("job ").replace(" ", "_")
        audit.write(
            {
                "job": job.id,
                "event": event,
                "tool": job.tool,
                "user": requester.username or None,
                "client": requester.client or None,
                "door": job.door,
                "request_id": job.request_id or None,
                "state": job.state,
                "by": by,
                "decider": by if event in ("approved", "denied") else None,
                "reason": reason,
                "digest": job.digest,
                "args": job.shown_args,
            },
            message,
        )

    def _notify(self, event: str, job: Job, decider: Identity | None, by: str | None) -> None:
        """Tell the approvers' webhooks about a request and what became of it (not about async jobs)."""
        if job.expires_at is None:  # no approval involved
            return
        if event == "cancelled" and decider is not None and is_requester(decider, job):
            event = "withdrawn"
        tool = self.host.registry.tools.get(job.tool)
        extra = tool.notify if tool is not None else ()
        if self.notifier.urls or extra:
            self.notifier.send(event, job, by, extra)


def memory_jobs() -> JobStore:
    from .state.memory import MemoryJobStore

    return MemoryJobStore()
