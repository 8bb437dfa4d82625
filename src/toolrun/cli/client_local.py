"""The local implementation of the CLI's client (cli/client.py): the catalog on this machine, through the one
ToolService, as the operator (who may call every tool).

The service is built on first use, so an error loading the catalog is raised where the command asks for its
first answer. Jobs are those of this machine's shared state (the data dir's state file, or Redis): the same
jobs a server on these settings keeps, so a local `jobs approve` decides a server's job, and runs it here.
"""

from __future__ import annotations

import asyncio
import builtins
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from .common import load_settings, make_service, open_access, operator_identity

if TYPE_CHECKING:
    from ..jobrecord import Job
    from ..jobs import Jobs
    from ..models import CallResult, ToolSpec
    from ..service import ToolService
    from ..settings import Settings

T = TypeVar("T")


class LocalClient:
    """The local catalog as the operator sees it; `audit` writes an audit record of each call run here."""

    def __init__(self, catalog: builtins.list[str] | None, *, audit: bool = False) -> None:
        self.catalog = catalog
        self.audit = audit
        self.identity = operator_identity()
        self._settings: Settings | None = None
        self._service: ToolService | None = None
        self._jobs: Jobs | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings()
        return self._settings

    @property
    def service(self) -> ToolService:
        if self._service is None:
            if self.audit:
                from ..access.audit import open_audit

                audit = open_audit(self.settings.audit_log or "-")
                self._service = make_service(self.catalog, self.settings, audit=audit)
            else:
                self._service = make_service(self.catalog, self.settings)
        return self._service

    @property
    def manager(self) -> Jobs:
        """The jobs of this machine's shared state. A job's call runs in the process of whoever approves it,
        which audits it there: so its service is one without `--audit`."""
        if self._jobs is None:
            service = make_service(self.catalog, self.settings) if self.audit else self.service
            self._jobs = service.use_jobs(self.settings, service.access)
        return self._jobs

    # -- tools -----------------------------------------------------------------------------------

    def list(self, group: str | None = None) -> builtins.list[ToolSpec]:
        return self.service.list(self.identity, group)

    def describe(self, key: str) -> ToolSpec:
        return self.service.describe(self.identity, key)

    def entry(self, key: str) -> dict[str, Any]:
        return self.service.entry(self.describe(key))

    def warnings(self, key: str) -> builtins.list[str]:
        return [str(problem) for problem in self.service.catalog_warnings(key)]

    def search(
        self, query: str, offset: int = 0, limit: int = 10, min_score: float | None = None, explain: bool = False
    ) -> dict[str, Any]:
        from ..search.relevance import DEFAULT_MIN_SCORE

        floor = DEFAULT_MIN_SCORE if min_score is None else min_score
        found = self.service.search(self.identity, query, offset, limit, floor, explain)
        items = [self.service.entry(t) for t in found.items]
        for i, item in enumerate(items):  # as GET /search answers
            if found.scores is not None:
                item["score"] = found.scores[i]
            if found.explain is not None:
                item["explain"] = found.explain[i]
        return {
            "query": query,
            "items": items,
            "min_score": floor,
            "total": found.total,
            "offset": found.offset,
            "limit": found.limit,
            "has_more": found.has_more,
            "next_offset": found.next_offset,
            "tools": found.items,
        }

    def plan(self, key: str, args: dict[str, Any]) -> dict[str, Any]:
        return self.service.plan(self.identity, key, args)

    def call(self, key: str, args: dict[str, Any]) -> tuple[CallResult | None, dict[str, Any]]:  # client.Called
        """A tool whose calls need approval becomes a job (an approver decides); any other runs here."""
        if self.describe(key).approval:
            return None, self._submit(key, args)
        from ..formatting import call_payload

        result: CallResult = _run_with_spinner(self.service.call(self.identity, key, args), key)
        return result, call_payload(result)

    # -- access ----------------------------------------------------------------------------------

    def explain(self, user: str, tool: str) -> dict[str, Any]:
        """From what the server reads (the config file, SVC_* variables, the key store), saying where each
        setting came from; a bearer token (JWT) is explained from its own claims, checked against its issuer."""
        from ..access import looks_like_jwt
        from ..access.explain import settings_source
        from ..state import SharedState

        settings = self.settings
        service = self.service
        access = open_access()
        limiter = SharedState(settings, keys=access.store).readable_limiter()
        if looks_like_jwt(user):
            answer = asyncio.run(access.explain_token(service, user, tool, limiter=limiter, settings=settings))
        else:
            answer = asyncio.run(access.explain(service, user, tool, limiter=limiter, settings=settings))
        answer["settings"] = settings_source(settings)
        return answer

    # -- jobs (docs/jobs.md) ---------------------------------------------------------------------

    def _view(self, job: Job) -> dict[str, Any]:
        return job.view(self.identity)

    def _submit(self, key: str, args: dict[str, Any]) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            job = await self.manager.submit(self.identity, key, args, as_json=True)
            await self.manager.notifier.drain()  # this process ends soon: the approvers' webhooks first
            return {"job": job.id, "status": job.state}

        return asyncio.run(go())

    @property
    def reader(self) -> Jobs:
        """The jobs to read: those of `manager`, or with no catalog here, the state file's all the same (a job
        holds what its views show; only running or deciding one needs its tool)."""
        if self._jobs is None and not self.catalog:
            from ..errors import UsageError

            try:
                return self.manager
            except UsageError:
                from ..catalog import Catalog
                from ..service import ToolService

                return ToolService(Catalog({})).use_jobs(self.settings)
        return self.manager

    def jobs(self, status: str | None = None, limit: int | None = None) -> builtins.list[dict[str, Any]]:
        from ..jobs import PAGE_MAX

        async def go() -> builtins.list[Job]:
            out: builtins.list[Job] = []
            cursor: str | None = None
            while True:
                size = PAGE_MAX if limit is None else min(PAGE_MAX, limit - len(out))
                page, cursor = await self.reader.list(self.identity, status, limit=size, cursor=cursor)
                out += page
                if cursor is None or (limit is not None and len(out) >= limit):
                    return out

        return [self._view(j) for j in asyncio.run(go())]

    def job(self, job_id: str) -> dict[str, Any]:
        return self._view(asyncio.run(self.reader.get(self.identity, job_id)))

    def job_action(self, job_id: str, action: str, reason: str = "") -> dict[str, Any]:
        """An approved job runs in this process, to its end: the job is then as it ended."""
        manager = self.manager

        async def go() -> Job:
            if action == "hold":
                return await manager.hold(self.identity, job_id)
            if action == "withdraw":
                return await manager.withdraw(self.identity, job_id, _withdrawn(reason))
            job: Job = await getattr(manager, action)(self.identity, job_id, reason)
            task = manager.tasks.get(job_id)
            if task is not None:
                await task
                job = await manager.get(self.identity, job_id)
            await manager.notifier.drain()
            return job

        return self._view(asyncio.run(go()))


def _withdrawn(reason: str) -> str:
    from ..jobrecord import WITHDRAWN

    return WITHDRAWN + (f" ({reason})" if reason else "")


def _run_with_spinner(coro: Coroutine[Any, Any, T], key: str) -> T:
    """Run the call; on a terminal, a spinner on stderr once it has taken half a second."""
    if not sys.stderr.isatty():
        return asyncio.run(coro)

    async def with_spinner() -> T:
        task = asyncio.ensure_future(coro)
        done, _ = await asyncio.wait({task}, timeout=0.5)
        if done:
            return task.result()
        from rich.console import Console
        from rich.markup import escape

        with Console(stderr=True).status(f"running {escape(key)}…"):
            return await task

    return asyncio.run(with_spinner())
