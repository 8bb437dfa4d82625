"""Shared state: one protocol per kind (kinds.py), one module per engine, and here the one place that picks
each kind's engine from the settings.

| kind | with `redis_url` | `serve --workers N` (N > 1) | one process |
|---|---|---|---|
| users and keys | Redis | SQLite `toolrun.db` | SQLite `toolrun.db` |
| rate-limit buckets, sessions, MCP sessions | Redis | SQLite `state.db` | memory |
| jobs | Redis | SQLite `state.db` | SQLite `state.db` |
| the concurrency pool | each replica its own, as without | shared memory | memory |

Engines: `memory` (this process), `sqlite` (the files of the data dir: every process of one machine),
`redis` (every replica), `shared_memory` (the pool, made before the fork so every worker inherits it).
Each is imported only when picked: `toolrun call` loads none of the server's engines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import UsageError
from .kinds import JobStore, KeyStore, Limiter, McpSessionStore, SessionStore, Slots, Versioned

if TYPE_CHECKING:
    from types import ModuleType

    from ..settings import Settings
    from .redis import RedisKeyStore
    from .sqlite import SQLiteState

__all__ = [
    "JobStore",
    "KeyStore",
    "Limiter",
    "McpSessionStore",
    "SessionStore",
    "SharedState",
    "Slots",
    "Versioned",
    "open_keys",
]


def redis_engine() -> ModuleType:
    """The Redis engine module, or a UsageError saying how to install the client it needs."""
    try:
        from . import redis as engine
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "redis":
            raise
        raise UsageError(
            "setting redis_url needs the redis package, which is not installed: pip install 'toolrun[redis]'"
        ) from None
    return engine


def open_keys(settings: Settings) -> KeyStore:
    """The configured key store: Redis when `redis_url` is set, else the SQLite file in the data dir."""
    return SharedState(settings).keys()


class SharedState:
    """Each kind of state of one process, opened on the engine the settings pick (see the module).

    `workers` is the number of processes of the server that must agree (`serve --workers`); `keys`, a key
    store already open, whose Redis connections the other kinds then share."""

    def __init__(self, settings: Settings, workers: int = 1, keys: KeyStore | None = None) -> None:
        self.settings = settings
        self.workers = workers
        self._keys = keys
        self._redis: RedisKeyStore | None = None

    @property
    def engine(self) -> str:
        """Where rate-limit buckets, sessions and MCP sessions live: `redis`, `sqlite` or `memory`."""
        if self.settings.redis_url:
            return "redis"
        return "sqlite" if self.workers > 1 else "memory"

    def redis(self) -> RedisKeyStore:
        """The Redis key store, whose connections every kind shares."""
        if self._redis is None:
            engine, keys = redis_engine(), self._keys
            if isinstance(keys, engine.RedisKeyStore):
                self._redis = keys
            else:
                self._redis = engine.RedisKeyStore(self.settings.redis_url)
        return self._redis

    def file(self) -> SQLiteState:
        """The state file of the data dir (`state.db`)."""
        from .sqlite import state_file

        return state_file(self.settings.dirs["data"])

    def keys(self) -> KeyStore:
        if self._keys is None:
            if self.settings.redis_url:
                self._keys = self.redis()
            else:
                from .sqlite import SQLiteKeyStore

                self._keys = SQLiteKeyStore(self.settings.dirs["data"] / "toolrun.db")
        return self._keys

    def limiter(self) -> Limiter | None:
        """The rate limiter, or None when `rate_limit.enabled` is off."""
        if not self.settings.rate_limit_enabled:
            return None
        return self._limiter(self.engine)

    def _limiter(self, engine: str) -> Limiter:
        calls, window = self.settings.rate_limit_calls, self.settings.rate_limit_window
        if engine == "redis":
            fail_open = self.settings.rate_limit_fail_open
            limiter: Limiter = redis_engine().RedisLimiter(self.redis(), calls, window, fail_open=fail_open)
        elif engine == "sqlite":
            from .sqlite import SQLiteLimiter

            limiter = SQLiteLimiter(self.file(), calls, window)
        else:
            from .memory import MemoryLimiter

            limiter = MemoryLimiter(calls, window)
        return limiter

    def readable_limiter(self) -> Limiter | None:
        """The rate limiter whose buckets this process can read: Redis, or the state file the workers of a
        `serve --workers N` share; None when the buckets live in one server process's memory (or limits are off)."""
        if not self.settings.rate_limit_enabled:
            return None
        if self.settings.redis_url:
            return self._limiter("redis")
        if (self.settings.dirs["data"] / "state.db").is_file():
            return self._limiter("sqlite")
        return None

    def sessions(self) -> SessionStore:
        """Where fn tools' session values live."""
        engine = self.engine
        if engine == "redis":
            store: SessionStore = redis_engine().RedisSessions(self.redis())
        elif engine == "sqlite":
            from .sqlite import SQLiteSessions

            store = SQLiteSessions(self.file())
        else:
            from .memory import MemorySessions

            store = MemorySessions()
        return store

    def mcp_sessions(self) -> McpSessionStore:
        """Where handshake-era MCP sessions (`Mcp-Session-Id` and owner) live."""
        engine = self.engine
        if engine == "redis":
            store: McpSessionStore = redis_engine().RedisMcpSessions(self.redis())
        elif engine == "sqlite":
            from .sqlite import SQLiteMcpSessions

            store = SQLiteMcpSessions(self.file())
        else:
            from .memory import MemoryMcpSessions

            store = MemoryMcpSessions()
        return store

    def jobs(self) -> JobStore:
        """Redis with `redis_url` (next to the keys), else the state file of the data dir, even for one process:
        jobs outlive a restart, and every worker and the local `toolrun jobs` see the same ones."""
        if self.settings.redis_url:
            store: JobStore = redis_engine().RedisJobStore(self.redis())
        else:
            from .sqlite import SQLiteJobStore

            store = SQLiteJobStore(self.file())
        return store

    def slots(self) -> Slots:
        """The concurrency pool of `max_concurrent_calls`: one per server, in shared memory when it has several
        workers (call this before the fork). Replicas each have their own."""
        cap = self.settings.max_concurrent_calls
        if self.workers > 1:
            from .shared_memory import SharedSlots

            return SharedSlots(cap, self.workers)
        from .memory import MemorySlots

        return MemorySlots(cap)
