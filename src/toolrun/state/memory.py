"""The memory engine: each kind of state in this process only (one worker, tests, a CLI with nothing to share).

Every store here is bounded: idle sessions expire, and past a maximum the least recently used goes first.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .jobindex import before, columns, sees
from .kinds import LIVE, Cursor, Versioned, Viewer

SESSION_TTL = 24 * 3600.0


class MemoryLimiter:
    """Fixed windows (kinds.Limiter) counted in a dict; past 100 000 buckets, those of past windows are dropped."""

    def __init__(self, calls: int, window: float, clock: Callable[[], float] | None = None) -> None:
        self.calls = calls
        self.window = window
        self._clock = clock or time.time
        self._buckets: dict[tuple[str, str], tuple[int, int]] = {}

    async def hit(self, bucket: str, key: str) -> float | None:
        now = self._clock()
        index = int(now // self.window)
        ident = (bucket, key)
        window, count = self._buckets.get(ident, (index, 0))
        if window != index:
            count = 0
        if count >= self.calls:
            return float(max(1, math.ceil((index + 1) * self.window - now)))
        self._buckets[ident] = (index, count + 1)
        if len(self._buckets) > 100_000:
            self._buckets = {k: v for k, v in self._buckets.items() if v[0] == index}
        return None

    async def peek(self, bucket: str, key: str) -> tuple[int, float]:
        """(calls counted in the current window, seconds until it resets), counting nothing."""
        now = self._clock()
        index = int(now // self.window)
        window, count = self._buckets.get((bucket, key), (index, 0))
        return (count if window == index else 0), (index + 1) * self.window - now


class _Shares:
    """Each owner's sessions, oldest first, and the share of a store one owner may hold (a tenth of it): past its
    share, an owner's own oldest session goes, so one caller opening sessions in a loop (an anonymous address, a
    key calling with ever new session names) never pushes another caller's out of the store."""

    def __init__(self, max_sessions: int) -> None:
        self.share = max(1, max_sessions // 10)
        self.held: dict[str, OrderedDict[str, None]] = {}

    def add(self, owner: str, sid: str) -> str | None:
        """Count `sid` as `owner`'s most recent; the owner's own oldest one to drop when it is past its share."""
        mine = self.held.setdefault(owner, OrderedDict())
        mine[sid] = None
        mine.move_to_end(sid)
        return mine.popitem(last=False)[0] if len(mine) > self.share else None

    def drop(self, owner: str, sid: str) -> None:
        mine = self.held.get(owner)
        if mine is not None:
            mine.pop(sid, None)
            if not mine:
                del self.held[owner]


def _session_owner(sid: str) -> str:
    """Whose session values `sid` holds: the caller before the separator (service.py writes `<caller>\x1f<name>`)."""
    return sid.partition("\x1f")[0]


class MemorySessions:
    """Session values in this process (kinds.SessionStore).

    Bounded: sessions idle for `ttl` seconds are dropped, and past `max_sessions` the least
    recently used one goes first, so named or abandoned sessions cannot grow memory forever; one caller holds at
    most a tenth of them (`_Shares`).
    """

    def __init__(self, max_sessions: int = 10_000, ttl: float = SESSION_TTL) -> None:
        self.max_sessions = max_sessions
        self.ttl = ttl
        self._data: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        self._shares = _Shares(max_sessions)

    async def load(self, sid: str) -> dict[str, Any]:
        entry = self._data.get(sid)
        if entry is None:
            return {}
        if time.monotonic() - entry[0] > self.ttl:
            del self._data[sid]
            self._shares.drop(_session_owner(sid), sid)
            return {}
        self._data.move_to_end(sid)
        return dict(entry[1])

    async def save(self, sid: str, values: dict[str, Any]) -> None:
        self._data[sid] = (time.monotonic(), dict(values))
        self._data.move_to_end(sid)
        own_oldest = self._shares.add(_session_owner(sid), sid)
        if own_oldest is not None:
            del self._data[own_oldest]
        while len(self._data) > self.max_sessions:
            gone, _ = self._data.popitem(last=False)
            self._shares.drop(_session_owner(gone), gone)


class MemoryMcpSessions:
    """One process's MCP sessions (kinds.McpSessionStore); idle ones expire, at most `max_sessions`."""

    def __init__(self, max_sessions: int = 10_000, ttl: float = SESSION_TTL) -> None:
        self.max_sessions = max_sessions
        self.ttl = ttl
        self._owners: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._shares = _Shares(max_sessions)  # one caller's sessions in a loop push out its own, not another's

    async def open(self, sid: str, owner: str) -> None:
        self._owners[sid] = (owner, time.monotonic())
        own_oldest = self._shares.add(owner, sid)
        if own_oldest is not None:
            del self._owners[own_oldest]
        while len(self._owners) > self.max_sessions:
            gone, (was, _) = self._owners.popitem(last=False)
            self._shares.drop(was, gone)

    async def owner(self, sid: str) -> str | None:
        entry = self._owners.get(sid)
        if entry is None:
            return None
        now = time.monotonic()
        if now - entry[1] > self.ttl:
            del self._owners[sid]
            self._shares.drop(entry[0], sid)
            return None
        self._owners[sid] = (entry[0], now)
        self._owners.move_to_end(sid)
        return entry[0]

    async def close(self, sid: str) -> None:
        entry = self._owners.pop(sid, None)
        if entry is not None:
            self._shares.drop(entry[0], sid)


_before = before  # the page's parameter of that name hides it


def _copy(record: dict[str, Any]) -> dict[str, Any]:
    """A deep copy through JSON: what a shared engine would give back (no aliasing with the caller's dict)."""
    value: dict[str, Any] = json.loads(json.dumps(record))
    return value


class MemoryJobStore:
    """Job records in this process (kinds.JobStore), kept until deleted."""

    def __init__(self) -> None:
        self._data: dict[str, Versioned] = {}

    async def create(self, record: dict[str, Any]) -> None:
        self._data[record["id"]] = (1, _copy(record))

    async def get(self, job_id: str) -> Versioned | None:
        entry = self._data.get(job_id)
        return None if entry is None else (entry[0], _copy(entry[1]))

    async def swap(self, job_id: str, version: int, record: dict[str, Any], keep: float | None = None) -> bool:
        entry = self._data.get(job_id)
        if entry is None or entry[0] != version:
            return False
        self._data[job_id] = (version + 1, _copy(record))
        return True

    async def all(self) -> list[Versioned]:
        return [(v, _copy(r)) for v, r in self._data.values()]

    async def delete(self, job_id: str) -> None:
        self._data.pop(job_id, None)

    async def page(
        self, *, state: str | None, viewer: Viewer | None, before: Cursor | None, limit: int
    ) -> list[Versioned]:
        cursor = before
        kept = [
            (v, r)
            for v, r in self._data.values()
            if (state is None or r.get("state") == state)
            and sees(viewer, r)
            and _before(cursor, float(r.get("created") or 0.0), r["id"])
        ]
        kept.sort(key=lambda e: (float(e[1].get("created") or 0.0), e[1]["id"]), reverse=True)
        return [(v, _copy(r)) for v, r in kept[:limit]]

    async def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for _v, r in self._data.values():
            out[r.get("state") or ""] = out.get(r.get("state") or "", 0) + 1
        return out

    async def live(self, requester: str) -> dict[str, int]:
        out = dict.fromkeys(LIVE, 0)
        for _v, r in self._data.values():
            if r.get("state") in LIVE and columns(r)["requester"] == requester:
                out[r["state"]] += 1
        return out

    async def due(self, moment: float, beat_before: float) -> list[Versioned]:
        out = []
        for v, r in self._data.values():
            c = columns(r)
            awaiting = c["state"] == LIVE[0] and c["expires_at"] is not None and c["expires_at"] <= moment
            running = c["state"] == LIVE[1] and (c["heartbeat"] is None or c["heartbeat"] < beat_before)
            if awaiting or running:
                out.append((v, _copy(r)))
        return out

    async def purge(self, finished_before: float) -> int:
        gone = [k for k, (_v, r) in self._data.items() if (r.get("finished") or finished_before) < finished_before]
        for job_id in gone:
            del self._data[job_id]
        return len(gone)


class MemorySlots:
    """The concurrency pool of one process (kinds.Slots): `cap` calls at most (None: no cap, only counted),
    as many waiting. shared_memory.SharedSlots is the same pool for the workers of one server.

    Cost, measured on the shared 2-core VM (CPython 3.11, load average about 10): a take and a give
    0.35-0.46 us, in a call that costs about 1 ms of CPU."""

    shared = False
    poll: float | None = None  # a waiter needs no look of its own: a freed slot here wakes it

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.running = 0  # this process's calls
        self.waiting = 0  # this process's callers waiting for a slot
        self._freed: asyncio.Event | None = None  # set when a slot is freed while calls wait
        self._freed_loop: asyncio.AbstractEventLoop | None = None
        self._poller: asyncio.Task[None] | None = None

    def attach(self, index: int) -> None:
        """Nothing to take over: this process's pool starts empty."""

    def take(self) -> bool:
        """Claim a slot if one is free."""
        cap = self.cap
        if cap is not None and self.running >= cap:
            return False
        self.running += 1
        return True

    def give(self) -> None:
        self.running -= 1
        self.wake()

    def wake(self) -> None:
        """A slot was freed: the waiters of this process look again."""
        if self._freed is not None and self.waiting:
            self._freed.set()

    async def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a slot (taken when this returns True), if the queue has room.

        A slot freed in this process wakes its waiters; one freed by another worker is seen by this process's
        one poller (`_poll`), which looks at the shared pool every `poll` seconds while anyone waits here."""
        if timeout <= 0 or not self.queue():
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while not self.take():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                if self._freed is None or self._freed.is_set() or self._freed_loop is not loop:
                    self._freed, self._freed_loop = asyncio.Event(), loop
                event = self._freed
                if self.poll is not None and (self._poller is None or self._poller.done()):
                    self._poller = loop.create_task(self._poll(self.poll))
                try:
                    await asyncio.wait_for(event.wait(), remaining)
                except TimeoutError:
                    return False
            return True
        finally:
            self.unqueue()

    async def _poll(self, interval: float) -> None:
        """While calls of this process wait: wake them when the pool has a free slot (freed by another worker)."""
        while self.waiting:
            await asyncio.sleep(interval)
            if self.free():
                self.wake()

    def free(self) -> bool:
        """Whether a slot is free now (a hint: `take` decides)."""
        return self.cap is None or self.running < self.cap

    def queue(self) -> bool:
        """Join the queue of callers waiting for a slot, if it has room (`cap` callers)."""
        if self.cap is not None and self.waiting >= self.cap:
            return False
        self.waiting += 1
        return True

    def unqueue(self) -> None:
        self.waiting -= 1
