"""Hot reload of the catalog: a content-hash poll, SIGHUP and `POST /admin/reload`, one code path.

- The new catalog is loaded in a worker thread with the same loader and checks as
  `toolrun validate-catalog`; only a catalog without errors replaces the running one.
- On any error the old catalog keeps serving, each problem is logged as `file:line:col: key: message`,
  and `/readyz` reports the failed reload (503) until a reload succeeds.
- The swap is one assignment (`ToolService.swap`): a call already running finishes on the catalog it
  started with; a call starting after the swap sees the new one.
- Every swap is announced to the listeners (the MCP door sends `notifications/tools/list_changed`).
- The poll hashes the catalog files' names and bytes every `reload_interval` seconds. It needs no
  inotify, so it works on Kubernetes ConfigMap volumes (a symlink swap) and NFS. A hash that stays
  the same after a failed reload is not retried until it changes (or SIGHUP / the admin route).
- fn modules are not re-imported: Python keeps a module once imported, and re-importing under live
  calls is not safe. A changed `fn:` reference (another module or function) is picked up; a changed
  module file needs a restart (docs/operations.md).

Each process reloads on its own: with `serve --workers N`, every worker polls the hash (the same
files give the same hash, so they converge within one interval), and SIGHUP sent to the parent is
passed to every worker.

Counting (`svc_catalog_reloads_total`): one reload of the server counts once, whatever the number of
workers. Every worker reloads the same files, so the first worker alone (`counting`; the others set it
False) counts its reloads, and /metrics sums the workers' values. The catch-up of a starting worker
(a replacement, or one that missed a SIGHUP while starting) is never counted: the server as a whole
had already reloaded, or it is the same files the server started with.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import CatalogError
from ..words import plural
from . import expand, load
from .options import LoadOptions
from .problems import warning_lines
from .source import read_catalog

log = logging.getLogger("toolrun.catalog.reload")
T = TypeVar("T")


def content_hash(paths: Sequence[str]) -> str:
    """The hash of the catalog as the loader would read it: each file's path and bytes, in load order.

    A file that cannot be read hashes as its error, so a missing file is a change too."""
    digest = hashlib.sha256()
    try:
        files = expand(paths)
    except OSError as exc:
        digest.update(f"expand:{exc}".encode())
        return digest.hexdigest()
    for path in files:
        digest.update(str(path).encode() + b"\0")
        try:
            digest.update(read_catalog(path))  # bounded, and never blocks on a FIFO (see catalog/source.py)
        except OSError as exc:
            digest.update(f"error:{exc.errno or exc}".encode())
        digest.update(b"\0")
    return digest.hexdigest()


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a daemon thread of its own, awaited.

    Not `asyncio.to_thread`: the default executor's threads are joined when the event loop closes and
    again at interpreter exit, so a load still running (a huge catalog, an `fn:` module whose import
    hangs) would hold a SIGTERM'd server past its grace. A daemon thread is abandoned instead: awaiting
    it can be cancelled, and nothing waits for it at exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, failed: bool) -> None:
        if not future.done():
            future.set_exception(value) if failed else future.set_result(value)

    def run() -> None:
        value: Any
        try:
            value, failed = fn(*args), False
        except BaseException as exc:  # handed to the awaiting task, whatever it is
            value, failed = exc, True
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, value, failed)

    threading.Thread(target=run, name=f"toolrun-{getattr(fn, '__name__', 'reload')}", daemon=True).start()
    return await future


@dataclass
class ReloadResult:
    ok: bool
    tools: int
    seconds: float
    problems: list[str] = field(default_factory=list)
    changed: bool = True

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": "ok" if self.ok else "error", "tools": self.tools}
        body["seconds"] = round(self.seconds, 3)
        if self.problems:
            body["problems"] = self.problems
        return body


class Reloader:
    """Reloads `service`'s catalog from `paths`; one reload at a time."""

    def __init__(
        self,
        service: Any,
        paths: Sequence[str],
        options: LoadOptions,
        environ: Mapping[str, str] | None = None,
        observer: Any = None,
    ) -> None:
        self.service = service
        self.paths = list(paths)
        self.options = options
        self.environ = os.environ if environ is None else environ
        self.observer = observer
        self.listeners: list[Callable[[], Any]] = []
        self.last_error: list[str] | None = None
        self.hash = content_hash(self.paths)
        self.generation = 0  # reloads finished (ok or not), and the last one's result
        self.last_result: ReloadResult | None = None
        self._lock: asyncio.Lock | None = None
        self.counting = True  # False in every worker but the first: see the module docstring

    async def reload(self, reason: str, counted: bool = True) -> ReloadResult:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            result = await self._reload(reason, counted and self.counting)
        self.generation += 1
        self.last_result = result
        return result

    async def next_result(self, generation: int, timeout: float) -> ReloadResult | None:
        """The result of the first reload to finish after `generation` (None if none within `timeout`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.generation <= generation:
            if loop.time() >= deadline:
                return None
            await asyncio.sleep(0.05)
        return self.last_result

    async def _reload(self, reason: str, counted: bool) -> ReloadResult:
        started = time.perf_counter()
        digest = await off_loop(content_hash, self.paths)
        try:
            catalog = await off_loop(load, self.paths, self.environ, self.options)
        except CatalogError as exc:
            problems = [str(p) for p in exc.problems]
            return self._failed(reason, digest, problems, started, counted)
        except Exception as exc:  # an unreadable file, a loader bug: the old catalog stays either way
            return self._failed(reason, digest, [f"{type(exc).__name__}: {exc}"], started, counted)
        self.service.swap(catalog)
        self.hash, self.last_error = digest, None
        seconds = time.perf_counter() - started
        tools = len(catalog.tools)
        log.info("catalog reloaded (%s): %s in %.2fs", reason, plural(tools, "tool"), seconds)
        for line in warning_lines(catalog.warnings):
            log.warning("%s", line)
        if counted:
            self._count("ok")
        for listener in list(self.listeners):
            try:
                outcome = listener()
                if asyncio.iscoroutine(outcome):
                    await outcome
            except Exception:  # a listener's failure must not undo the reload
                log.exception("catalog reload listener failed")
        return ReloadResult(True, tools, seconds)

    def _failed(self, reason: str, digest: str, problems: list[str], started: float, counted: bool) -> ReloadResult:
        self.hash, self.last_error = digest, problems
        log.error(
            "catalog reload (%s) failed; still serving the previous catalog (%s). Problems:",
            reason,
            plural(len(self.service.registry), "tool"),
        )
        for problem in problems:
            log.error("  %s", problem)
        if counted:
            self._count("error")
        return ReloadResult(False, len(self.service.registry), time.perf_counter() - started, problems)

    def _count(self, outcome: str) -> None:
        observe = getattr(self.observer, "observe_reload", None)
        if observe is not None:
            observe(outcome)

    async def poll_once(self, counted: bool = True) -> ReloadResult | None:
        """Reload when the files' hash changed since the last load (or last failed attempt)."""
        digest = await off_loop(content_hash, self.paths)
        if digest == self.hash:
            return None
        return await self.reload("catalog files changed", counted)

    async def poll_forever(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.poll_once()
            except Exception as exc:  # keep polling whatever happened (out of descriptors, a thread refused)
                log.warning("catalog poll failed: %s: %s", type(exc).__name__, exc)

    async def _catch_up(self) -> None:
        try:
            await self.poll_once(counted=False)
        except Exception as exc:
            log.warning("catalog check at start failed: %s: %s", type(exc).__name__, exc)

    @contextlib.asynccontextmanager
    async def running(self, interval: float) -> AsyncIterator[None]:
        """While inside: SIGHUP reloads (when this is the main thread) and the hash is polled every
        `interval` seconds (0: no poll)."""
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[Any]] = set()

        def on_sighup() -> None:
            task = loop.create_task(self.reload("SIGHUP"))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        try:
            loop.add_signal_handler(signal.SIGHUP, on_sighup)
            hup = True
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread (an in-process test app)
            hup = False
        poll = loop.create_task(self.poll_forever(interval)) if interval > 0 else None
        # A SIGHUP that came while this process was starting (a worker ignores it until here) would be
        # lost: catch up once with the files as they are now.
        catch_up = loop.create_task(self._catch_up())
        tasks.add(catch_up)
        catch_up.add_done_callback(tasks.discard)
        try:
            yield
        finally:
            if hup:
                loop.remove_signal_handler(signal.SIGHUP)
            # A reload still running is abandoned (its thread is a daemon): shutdown never waits for it.
            pending = [*tasks, *([poll] if poll is not None else [])]
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def check(self) -> None:
        """The /readyz check: fails while the last reload failed."""
        if self.last_error is not None:
            raise RuntimeError(f"the last catalog reload failed ({plural(len(self.last_error), 'problem')})")
