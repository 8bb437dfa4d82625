"""ToolService: the one API every door (CLI, HTTP, MCP, UI) calls.

start_or_call(identity, key, args): a job (approval, `async: true`, or asked for), else `call`
call(identity, key, args)
  1. registry.get(identity, key)      -> ToolSpec, or NotFound (unknown and hidden look alike)
  2. limiter.hit(bucket, key)         -> or RateLimited(retry_after)
  3. params.validate(tool, args)      -> typed values, or ParamError
  4. a slot of max_concurrent         -> waits up to queue_timeout, else Overloaded (503)
  5. run: exec/curl -> render -> spawn -> ExecResult; fn -> call it
  6. observer.observe(key, outcome, seconds)   (once per call, whatever the door)

Doors ask it what a caller may see (list, describe, visible, search) and how ready it is
(readiness_checks); they never read `registry` themselves.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from . import context, params, telemetry
from .access.audit import AuditLog, call_record
from .catalog import Catalog, LoadOptions, child_env, load, resolve_fn
from .errors import (
    Conflict,
    OutputInvalid,
    Overloaded,
    ParamError,
    Problem,
    RateLimited,
    SandboxUnavailable,
    ToolFailed,
    ToolrunError,
)
from .exec import executor, render, sandbox
from .exec.fnthreads import FN_THREADS
from .jobrecord import Job, digest
from .models import CallOrigin, CallResult, Identity, ToolSpec
from .registry import Page, Registry
from .search.relevance import DEFAULT_MIN_SCORE
from .state.kinds import Limiter, SessionStore, Slots
from .state.memory import MemorySlots

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .access import Access
    from .jobs import Jobs
    from .search.semantic import Semantic
    from .settings import Settings

# Linux refuses (E2BIG) a single argument of 128 KiB or more, and `sh -c <command>` is one argument.
MAX_COMMAND = 128 * 1024 - 1


@dataclass(frozen=True, slots=True)
class JobStarted:
    """A call that became a job instead of running now (`ToolService.start_or_call`): the job's record."""

    job: Job
    asked: bool  # the caller asked for it (HTTP `Prefer: respond-async`), not its tool

    @property
    def id(self) -> str:
        return self.job.id

    @property
    def state(self) -> str:
        return self.job.state


class Observer(Protocol):
    def observe(self, key: str, outcome: str, seconds: float) -> None: ...


def load_options(settings: Settings) -> LoadOptions:
    cache_dir = settings.dirs["cache"] / "catalog" if settings.catalog_cache else None
    return LoadOptions(
        default_timeout=settings.default_timeout,
        max_output=settings.max_output,
        cache_dir=cache_dir,
        curl_protocols=settings.curl_protocols,
        sandbox_default=settings.sandbox_default,
    )


def catalog_paths(flags: Sequence[str] | None, settings: Settings) -> list[str]:
    """--catalog flags, else the `catalog` setting (environment or config file), else ./tools.yaml."""
    if flags:
        return list(flags)
    if settings.catalog:
        return list(settings.catalog)
    return ["tools.yaml"]


class CatalogState:
    """One loaded catalog and what is derived from it; a reload swaps the whole object at once.

    A call takes the state current when it starts and uses it to the end: a reload during the
    call changes nothing for it (its tool, its environment, its function).
    """

    __slots__ = ("catalog", "checks", "envs", "fns", "registry")

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.registry = Registry(catalog.tools.values())
        self.fns: dict[str, tuple[Any, bool]] = {}  # key -> (function, is it async)
        # Each tool's child environment, built on its first call: the server's environment is read once.
        self.envs: dict[str, dict[str, str]] = {}
        # Each tool's parameter checks (params.prepare), made on its first call: a reload brings new ones with the
        # new state, all at once.
        self.checks: dict[str, params.Checks] = {}

    def checks_for(self, tool: ToolSpec) -> params.Checks:
        """`tool`'s parameter checks, kept when `tool` is this catalog's (a job may run a tool of an older one)."""
        checks = self.checks.get(tool.key)
        if checks is None or checks.tool is not tool:
            checks = params.prepare(tool)
            if self.registry.tools.get(tool.key) is tool:
                self.checks[tool.key] = checks
        return checks


class ToolService:
    def __init__(
        self,
        catalog: Catalog,
        *,
        environ: Mapping[str, str] | None = None,
        access: Access | None = None,
        limiter: Limiter | None = None,
        observer: Observer | None = None,
        sessions: SessionStore | None = None,
        max_concurrent: int | None = None,
        queue_timeout: float = 0.0,
        audit: AuditLog | None = None,
        slots: Slots | None = None,
    ) -> None:
        self.state = CatalogState(catalog)
        self.audit = audit
        self.environ = os.environ if environ is None else environ
        self.access = access
        self.limiter = limiter
        self.observer = observer
        self.sessions = sessions
        # The concurrency pool: this process's (`max_concurrent`), or one shared by the workers (toolrun.state).
        self.slots: Slots = slots if slots is not None else MemorySlots(max_concurrent)
        self.max_concurrent = self.slots.cap
        self.queue_timeout = queue_timeout
        self._jobs: Jobs | None = None

    @property
    def jobs(self) -> Jobs:
        """The jobs (jobs.py): in this process's memory unless `use_jobs` gave them the shared state."""
        if self._jobs is None:
            from .jobs import Jobs, memory_jobs

            self._jobs = Jobs(self, memory_jobs())
        return self._jobs

    def use_jobs(self, settings: Settings, access: Access | None = None) -> Jobs:
        from .jobs import Jobs

        self._jobs = Jobs.shared(self, settings, access)
        return self._jobs

    @property
    def catalog(self) -> Catalog:
        return self.state.catalog

    @property
    def registry(self) -> Registry:
        return self.state.registry

    def rank_by_meaning(self, semantic: Semantic, before_fork: bool = False) -> None:
        """Rank this catalog's searches by meaning too (a reload listener calls this again for the new one).
        `before_fork`: only compute the catalog's vectors id and rows, in a server's first process."""
        if before_fork:
            semantic.before_fork(self.registry)
        else:
            semantic.prepare(self.registry)

    def swap(self, catalog: Catalog) -> None:
        """Serve `catalog` from now on; calls already running finish on the one they started with."""
        self.state = CatalogState(catalog)

    @classmethod
    def from_paths(
        cls, paths: Sequence[str], settings: Settings, environ: Mapping[str, str] | None = None, **kwargs: Any
    ) -> ToolService:
        environ = os.environ if environ is None else environ
        sandbox.private_paths(environ, settings)  # its audit log and dirs stay hidden from sandboxed tools
        sandbox.own_catalogs(paths)  # and the catalog folders named (a tool may not add a catalog file to one)
        catalog = load(paths, environ, load_options(settings))
        return cls(catalog, environ=environ, **kwargs)

    # -- reading ---------------------------------------------------------------------------------

    def catalog_warnings(self, key: str | None = None) -> list[Problem]:
        """The catalog's warnings (with `key`: about that tool), less those its tools acknowledged."""
        return [p for p in self.catalog.warnings if key is None or p.key == key]

    def list(self, identity: Identity, group: str | None = None) -> list[ToolSpec]:
        tools = self.registry.visible(identity)
        if group:
            tools = [t for t in tools if group in t.groups]
        return tools

    def describe(self, identity: Identity, key: str) -> ToolSpec:
        return self.registry.get(identity, key)

    def describe_json(self, identity: Identity, key: str) -> bytes:
        """`describe`, as the tool entry in compact JSON (encoded once per loaded catalog and host answer)."""
        return self.entry_json(self.registry.get(identity, key))

    def entry(self, tool: ToolSpec) -> dict[str, Any]:
        """The tool entry, its sandbox's `enforced` as this host answers now (never as it answered at load)."""
        return tool.entry(None if tool.sandbox is None else sandbox.host_problem())

    def entry_json(self, tool: ToolSpec) -> bytes:
        """`entry` in compact JSON (encoded once per loaded catalog and host answer): a listing joins these."""
        return self.registry.entry_json(tool, None if tool.sandbox is None else sandbox.host_problem())

    def search(
        self,
        identity: Identity,
        query: str,
        offset: int = 0,
        limit: int = 10,
        min_score: float = DEFAULT_MIN_SCORE,
        explain: bool = False,
    ) -> Page:
        """A page of the caller's tools for `query`: those scoring `min_score` or more (search/relevance.py)."""
        return self.registry.search(identity, query, offset, limit, min_score, explain)

    def spec(self, key: str) -> ToolSpec | None:
        """The catalog's tool `key`, visible or not: for a door's words about a result it already holds (a failed
        sandboxed call's note), never to decide who may see or call it."""
        return self.registry.tools.get(key)

    def visible(self, identity: Identity, key: str) -> ToolSpec | None:
        """The tool `key` if this caller may see it, else None (unknown and hidden look alike)."""
        tool = self.registry.tools.get(key)
        return tool if tool is not None and identity.can_access(tool) else None

    def lookup(self, key: str) -> ToolSpec | None:
        """The tool `key` whoever asks: only for what is never shown to a caller (an argument schema
        checked before the scoped call itself)."""
        return self.registry.tools.get(key)

    def tool_keys(self) -> tuple[str, ...]:
        """Every tool key, sorted (a door naming tools its own way maps the names once)."""
        return tuple(self.registry.tools)

    def __len__(self) -> int:
        return len(self.registry)

    def readiness_checks(self) -> dict[str, Callable[[], Awaitable[None]]]:
        """The checks behind /readyz, by name; each raises when its part cannot serve.

        search: a search over the whole catalog (builds the index if it was not built yet);
        cache: the session store answers (Redis with a `redis_url`); loader: the key store answers;
        sandbox: the sandboxed tools (if any) can get their sandbox here (bwrap is there and works).
        """
        admin = Identity(groups=frozenset({"admin"}), anonymous=False)

        async def search() -> None:
            self.registry.search(admin, "health", 0, 1)

        async def cache() -> None:
            ping = getattr(self.sessions, "ping", None)
            if ping is not None:
                await ping()

        async def loader() -> None:
            if self.access is not None:
                await self.access.ping()

        async def sandboxes() -> None:
            problem = self.sandbox_problem()
            if problem is not None:
                raise SandboxUnavailable(problem)

        return {"search": search, "cache": cache, "loader": loader, "sandbox": sandboxes}

    def sandbox_problem(self) -> str | None:
        """Why this catalog's sandboxed tools cannot run on this host (None: they can, or there are none): no
        working bwrap, or a profile that cannot be set up here (a writable path missing, toolrun's own files)."""
        problem = sandbox.load_problem(self.registry.tools.values())
        if problem is not None:
            return problem
        from .exec.sandboxview import profile_problems

        found = profile_problems(self.registry.tools.values())
        if not found:
            return None
        shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
        return f"{len(found)} sandboxed tool(s) cannot run on this host: {shown}"

    # -- calling ---------------------------------------------------------------------------------

    def plan(self, identity: Identity, key: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """What a call would run, without running it (`toolrun call --dry-run`)."""
        tool = self.registry.get(identity, key)
        values = params.validate(tool, args)
        plan: dict[str, Any] = {"key": tool.key, "kind": tool.kind, "timeout": tool.timeout}
        shown = {k: "[secret]" if k in tool.secret_names and v is not None else v for k, v in values.items()}
        if tool.kind == "fn":
            plan["fn"] = tool.source
            plan["args"] = shown
            return plan
        refs, secret_env = render.secret_refs(tool, values)
        plan["command"] = render.render(tool.source, refs)
        plan["stdin"] = json.dumps(shown, ensure_ascii=False) if tool.stdin else None
        plan["env"] = sorted({*child_env(tool, self.environ), *secret_env})
        plan["cwd"] = tool.cwd or ("/tmp (the sandbox's own)" if tool.sandbox else os.getcwd())
        if tool.user is not None:
            plan["user"] = tool.user
        plan["limits"] = tool.limits.shown()
        if tool.sandbox is not None:
            plan["sandbox"] = sandbox.describe(tool.sandbox, tool.user)
        return plan

    async def start_or_call(
        self,
        identity: Identity,
        key: str,
        args: Mapping[str, Any] | None = None,
        *,
        origin: CallOrigin | None = None,
        session_id: str | None = None,
        prefer_async: bool = False,
        background: bool = True,
        as_json: bool = False,
        watch: Callable[[Awaitable[CallResult]], Awaitable[CallResult]] | None = None,
    ) -> CallResult | JobStarted:
        """A call as its tool wants it run: every door's one entry for calling a tool.

        A tool with `approval: required` makes it a job awaiting approval. An `async: true` tool, or a caller
        asking for it (`prefer_async`), makes it a running job, answered at once: where the door can answer so
        (`background`; over MCP such a call runs to its end). Else it runs now (`call`), wrapped in `watch` when
        given (the HTTP doors cancel it when their client goes away). `as_json`: how the job keeps its result."""
        tool = self.registry.get(identity, key)
        if tool.approval or (background and (tool.run_async or prefer_async)):
            job = await self.jobs.submit(identity, key, args, origin=origin, as_json=as_json)
            return JobStarted(job, prefer_async)
        call = self.call(identity, key, args, session_id=session_id, origin=origin)
        return await (call if watch is None else watch(call))

    async def admit(
        self, identity: Identity, tool: ToolSpec, args: Mapping[str, Any] | None, *, counted: bool = False
    ) -> dict[str, Any]:
        """The one admission of a call and of a job (jobs.py): a hit on the caller's rate bucket (unless the call
        already counted there: the run of a job), then its parameters validated. RateLimited, or ParamError."""
        if self.limiter is not None and not counted:
            retry = await self.limiter.hit(identity.bucket, tool.key)
            if retry is not None:
                raise RateLimited(tool.key, int(retry))
        return params.validate(tool, args or {}, self.state.checks_for(tool))

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
    ) -> CallResult:
        """Run one call. `counted`: it already counted in the caller's rate bucket (a job, when it was asked).
        `approved`: the digest a person approved (a job): the call runs only the tool and arguments it names, from
        this call's catalog, whatever a reload did since the approval; `salt`: the job's key of that digest."""
        state = self.state  # this call's catalog, to its end, whatever a reload does meanwhile
        started = time.perf_counter()
        tool = state.registry.get(identity, key)  # unknown or hidden: a 404, not a call (no audit record)
        span = telemetry.start_call(tool, identity, origin)  # None unless tracing is on
        outcome = "exception"
        result: CallResult | None = None
        error: type[BaseException] | None = None
        try:
            try:
                values = await self.admit(identity, tool, args, counted=counted)
            except RateLimited:
                outcome = "rate_limited"
                raise
            except ParamError:
                outcome = "invalid"
                raise
            if approved is not None and digest(tool, args or {}, salt) != approved:
                raise Conflict(f"{tool.key} changed between its approval and its run: nothing ran")
            slots = self.slots
            if not slots.take() and not await slots.wait(self.queue_timeout):
                outcome = "overloaded"
                raise Overloaded(slots.cap or 0)
            try:
                result = await self._run(state, identity, tool, values, session_id)
            finally:
                slots.give()
            if result.exec is None:
                outcome = "ok"
            elif result.exec.timed_out:
                outcome = "timeout"
            else:
                outcome = "ok" if result.exec.returncode == 0 else "error"
            return result
        except BaseException as exc:
            error = type(exc.original) if isinstance(exc, ToolFailed) else type(exc)
            outcome = _failed_outcome(exc, outcome)
            if isinstance(exc, ToolrunError) and tool.has_secrets:
                _hide_secrets(exc, tool, args or {})
            raise
        finally:
            seconds = time.perf_counter() - started
            if self.observer is not None:
                self.observer.observe(tool.key, outcome, seconds)
                if result is not None and result.exec is not None and result.exec.truncated:
                    truncated = getattr(self.observer, "observe_truncated", None)
                    if truncated is not None:
                        truncated(tool.key)
            if self.audit is not None:
                self.audit.write(call_record(identity, tool, args, origin, outcome, result, error, seconds))
            telemetry.end_call(span, outcome, result, error, seconds)

    @property
    def running(self) -> int:
        """Calls running in this process."""
        return self.slots.running

    @property
    def waiting(self) -> int:
        """Calls of this process waiting for a slot."""
        return self.slots.waiting

    async def _run(
        self, state: CatalogState, identity: Identity, tool: ToolSpec, values: dict[str, Any], session_id: str | None
    ) -> CallResult:
        started = time.perf_counter()
        if tool.kind == "fn":
            value = await self._call_fn(state, identity, tool, values, session_id)
            return CallResult(tool.key, value, None, time.perf_counter() - started)
        env = state.envs.get(tool.key)
        if env is None:
            env = state.envs[tool.key] = child_env(tool, self.environ)
        refs = values
        if tool.has_secrets:
            refs, secret_env = render.secret_refs(tool, values)
            env = {**env, **secret_env}
        command, env = telemetry.into_tool(tool.kind, render.render(tool.source, refs), env)  # trace context
        size = len(command.encode("utf-8", "surrogatepass"))
        if size > MAX_COMMAND:
            raise ParamError(
                f"the command rendered from these parameters is {size} bytes, over the {MAX_COMMAND} "
                "bytes one command line may have: send large values with `stdin: true`"
            )
        stdin = json.dumps(values, ensure_ascii=False).encode() if tool.stdin else None
        try:
            result = await executor.run(
                command,
                timeout=tool.timeout,
                env=env,
                cwd=tool.cwd,
                stdin=stdin,
                limits=tool.limits,
                user=tool.user,
                sandbox=tool.sandbox,
            )
        except SandboxUnavailable as exc:  # the same words, naming the tool
            raise SandboxUnavailable(str(exc).replace("this tool", f"tool {tool.key}", 1), tool.key) from None
        except (OSError, ValueError, KeyError) as exc:  # cwd missing, prlimit missing, user gone, ...
            raise ToolFailed(exc) from exc
        output = tool.typed_output
        if output is not None and result.returncode == 0 and not result.timed_out:  # typed output (typedoutput.py)
            from .typedoutput import parse

            value = parse(output, result.stdout, tool.key, result.truncated)
            return CallResult(tool.key, value, result, time.perf_counter() - started, typed=True)
        return CallResult(tool.key, result.value(), result, time.perf_counter() - started)

    async def _call_fn(
        self, state: CatalogState, identity: Identity, tool: ToolSpec, values: dict[str, Any], session_id: str | None
    ) -> Any:
        entry = state.fns.get(tool.key)
        if entry is None:
            try:
                fn = resolve_fn(tool.source, __import__("pathlib").Path(tool.file).parent if tool.file else None)
            except Exception as exc:
                raise ToolFailed(exc) from exc
            entry = state.fns[tool.key] = (fn, inspect.iscoroutinefunction(fn))
        fn, is_async = entry
        persistent = session_id is not None and self.sessions is not None
        # Kept per person: a user deleted and made again under the name is another person (Identity.since).
        owner = f"{identity.bucket}@{identity.since!r}" if identity.since else identity.bucket
        sid = f"{owner}\x1f{session_id}"
        session = await self.sessions.load(sid) if persistent and self.sessions else {}
        ctx = context.CallContext(identity=identity, session=session, persistent=persistent)
        token = context.activate(ctx)
        try:
            if tool.inline and not is_async:
                value = fn(**values)  # the catalog vouches that it is quick and never blocks: no deadline to keep
            else:
                # asyncio.timeout, not wait_for: no extra Task per call
                async with asyncio.timeout(tool.timeout):
                    if is_async:
                        value = await fn(**values)
                    else:
                        call = telemetry.carried(_call_in_context)  # the call's span, current in the thread too
                        value = await FN_THREADS.run(asyncio.get_running_loop(), call, ctx, fn, values)
        except TimeoutError as exc:
            raise ToolFailed(TimeoutError(f"timeout after {executor.format_seconds(tool.timeout)}s")) from exc
        except ToolrunError:
            raise
        except (Exception, SystemExit) as exc:  # a function calling sys.exit() fails its call, not the server
            raise ToolFailed(exc) from exc
        finally:
            context.deactivate(token)
        if persistent and ctx.dirty and self.sessions is not None:
            await self.sessions.save(sid, ctx.session)
        return value


def _call_in_context(ctx: context.CallContext, fn: Any, values: dict[str, Any]) -> Any:
    token = context.activate(ctx)
    try:
        return fn(**values)
    finally:
        context.deactivate(token)


def _failed_outcome(exc: BaseException, outcome: str) -> str:
    """The audit outcome of a call that raised `exc` (`outcome`: what was known before)."""
    if isinstance(exc, OutputInvalid):
        return "error"  # the command ran, and printed what its `output:` does not allow
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"  # its client went away, or the server is stopping: its processes are killed
    return outcome


def _hide_secrets(exc: ToolrunError, tool: ToolSpec, given: Mapping[str, Any]) -> None:
    """Keep a secret param's value and a secret env value out of an error's message."""
    hidden = [v for p in tool.params if p.secret and isinstance(v := given.get(p.name), str)]
    exc.hide(hidden + [tool.env[name] for name in tool.secret_env if name in tool.env])
