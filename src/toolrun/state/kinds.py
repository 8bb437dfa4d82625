"""The kinds of shared state: one protocol each, whatever engine keeps it.

| kind | protocol | memory | SQLite file | Redis | shared memory |
|---|---|---|---|---|---|
| users and keys | `KeyStore` | | `toolrun.db` | yes | |
| rate-limit buckets | `Limiter` | one process | `state.db` | yes | |
| the concurrency pool | `Slots` | one process | | | the workers of one server |
| session values of fn tools | `SessionStore` | one process | `state.db` | yes | |
| MCP sessions (handshake era) | `McpSessionStore` | one process | `state.db` | yes | |
| jobs | `JobStore` | one process | `state.db` | yes | |

`toolrun.state` (the package) picks the engine of each kind from the settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..keyrules import KeyRecord, NewKey, User

Versioned = tuple[int, dict[str, Any]]  # a job record and its version number


class KeyStore(Protocol):
    """Users (name, email, groups) and their API keys (prefix, SHA-256 hash, creation, expiry, revocation).

    Consistency: every write is seen by the next read of any process or replica (a revoked key stops
    working at the next request). Keys are minted by access/ (access.apikeys.mint): a store keeps the record and
    hash it is given and never makes a key."""

    def add_key(self, new: NewKey) -> None:
        """Keep a key access/ minted (its record and hash), creating its user or updating the user's email and,
        with `new.set_groups`, groups (keyrules.groups_for_new_key), in one transaction."""

    def resolve(self, key: str) -> User | None: ...

    def revoke(self, prefix: str, at: float | None = None) -> bool: ...

    def get_user(self, username: str) -> User | None: ...

    def set_groups(self, username: str, groups: list[str]) -> bool: ...

    def delete_user(self, username: str) -> int | None: ...

    def inspect(self, key: str) -> tuple[KeyRecord, User] | None: ...

    def list_users(self) -> list[User]: ...

    def list_keys(self) -> list[KeyRecord]: ...

    def ping(self) -> None: ...

    async def aresolve(self, key: str) -> User | None: ...

    async def alist_users(self) -> list[User]: ...

    async def alist_keys(self) -> list[KeyRecord]: ...

    async def aping(self) -> None: ...


class Limiter(Protocol):
    """Rate-limit buckets: per (caller's bucket, tool), the calls counted in a fixed window of `window` seconds.

    Windows are aligned to the wall clock (window n covers [n*W, (n+1)*W)), so every worker and replica
    agrees on them. Consistency: a hit is one atomic step (read, count, reset of a new window) for every
    process sharing the engine, so `calls` holds exactly; `retry_after` is the time left in the window,
    rounded up."""

    calls: int
    window: float

    async def hit(self, bucket: str, key: str) -> float | None:
        """Count one call; return None when allowed, else the seconds until the window resets."""
        ...

    async def peek(self, bucket: str, key: str) -> tuple[int, float]:
        """(calls counted in the current window, seconds until it resets), counting nothing."""
        ...


class Slots(Protocol):
    """The concurrency pool: at most `cap` tool calls run at once (None: no cap, only counted), and at most
    `cap` callers wait for a slot.

    Consistency: the cap holds exactly for every process sharing the pool (one process, or the workers of
    one server); replicas each have their own pool. `running` and `waiting` count this process's calls."""

    cap: int | None
    running: int
    waiting: int
    shared: bool

    def take(self) -> bool:
        """Claim a slot if one is free."""
        ...

    def give(self) -> None:
        """Give back a slot taken by `take` (or `wait`)."""
        ...

    async def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a slot (taken when this returns True), if the queue has room."""
        ...

    def attach(self, index: int) -> None:
        """In server worker `index` (0-based), at its start: take over the worker's share of the pool (what a
        dead predecessor still held goes back)."""
        ...


class SessionStore(Protocol):
    """Session values of fn tools (`get_session` / `set_session`), by session id (the caller's bucket and the
    client's session), idle ones dropped after a day.

    Consistency: last writer wins; a value saved by one worker or replica is loaded by the next call on any."""

    async def load(self, sid: str) -> dict[str, Any]: ...

    async def save(self, sid: str, values: dict[str, Any]) -> None: ...


class McpSessionStore(Protocol):
    """MCP sessions of handshake-era clients: which `Mcp-Session-Id`s exist, and whose each one is.

    Consistency: a session opened (or closed) on one worker or replica exists (or is gone) on every other at
    the next request; using a session restarts its idle clock (a day)."""

    async def open(self, sid: str, owner: str) -> None: ...

    async def owner(self, sid: str) -> str | None:
        """The session's owner, or None when it does not exist (never opened, closed or expired)."""
        ...

    async def close(self, sid: str) -> None: ...


Cursor = tuple[float, str]  # (created, id) of the last job of a page: the next page starts after it
LIVE = ("awaiting_approval", "running")  # the states of a job that holds a place in its caller's share


class Viewer(Protocol):
    """Who lists jobs (models.Identity): the store keeps the jobs it may see (the requester's person, or one of
    `groups` among the job's approvers); None (an admin) keeps them all."""

    @property
    def person(self) -> str: ...

    @property
    def groups(self) -> frozenset[str]: ...


class JobStore(Protocol):
    """Job records (jobs.py): each a JSON object with a version number.

    Consistency: a change is a compare-and-set on the version, so two workers or replicas acting on one job
    at once (two approvers, an approval and a reload) cannot both win: the loser reads the record again and
    finds it decided. A finished job's record may expire after `keep` seconds.

    Scale: every engine keeps the state, requester, creation time and deadlines of a job beside its record
    (SQLite columns with indexes, Redis sorted sets), so counting, paging and finding what is due never read
    every record; the SQLite engine does its work in a thread, off the event loop."""

    async def create(self, record: dict[str, Any]) -> None: ...

    async def get(self, job_id: str) -> Versioned | None: ...

    async def swap(self, job_id: str, version: int, record: dict[str, Any], keep: float | None = None) -> bool: ...

    async def all(self) -> list[Versioned]: ...

    async def delete(self, job_id: str) -> None: ...

    async def page(
        self, *, state: str | None, viewer: Viewer | None, before: Cursor | None, limit: int
    ) -> list[Versioned]:
        """Up to `limit` jobs, newest first (by creation time, then id), created before `before`, in `state`
        if given, that `viewer` may see (None: all)."""
        ...

    async def counts(self) -> dict[str, int]:
        """How many jobs are in each state (states with none may be left out)."""
        ...

    async def live(self, requester: str) -> dict[str, int]:
        """How many jobs of `requester` (its person: Identity.person) await approval and run, by state."""
        ...

    async def due(self, moment: float, beat_before: float) -> list[Versioned]:
        """The jobs time may change: awaiting approval with `expires_at` <= `moment`, and running with a heartbeat
        older than `beat_before` (or none)."""
        ...

    async def purge(self, finished_before: float) -> int:
        """Drop the jobs that finished before `finished_before` (their retention ended), reclaim the space they
        held, and say how many went."""
        ...
