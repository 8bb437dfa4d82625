"""Shared state for the worker processes of one `toolrun serve --workers N`, in one SQLite file.

Without `redis_url`, a server with several workers keeps what must be exact for the whole server
here, in `<data dir>/state.db` (WAL mode): the rate-limit buckets, the session values of fn tools
and the MCP sessions. Each operation is one short statement, atomic across processes (SQLite
serialises writers with a file lock; `busy_timeout` makes a writer wait its turn, for
microseconds, instead of failing). `synchronous=OFF`: this is state a power cut may lose (a rate
window, a session), not records; the key store keeps its own file and its own durability.

A single worker (`--workers 1`) keeps the same state in memory (faster, and nothing to share):
`MemoryLimiter`, `MemorySessions` and `MemoryMcpSessions` (here).
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from . import forks
from .statefiles import private_file

SESSION_TTL = 24 * 3600.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS buckets (
    bucket TEXT NOT NULL, tool TEXT NOT NULL, win INTEGER NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (bucket, tool)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (sid TEXT PRIMARY KEY, data TEXT NOT NULL, touched REAL NOT NULL);
CREATE TABLE IF NOT EXISTS mcp_sessions (sid TEXT PRIMARY KEY, owner TEXT NOT NULL, touched REAL NOT NULL);
"""


class SQLiteState:
    """One connection per process (and thread) to the state file; reopened after a fork."""

    def __init__(self, path: Path) -> None:
        self.path = private_file(path)  # 0600 in a 0700 folder (statefiles.py)
        self._local = threading.local()
        self._pid = forks.pid()
        conn = self.conn()
        conn.executescript(_SCHEMA)

    def conn(self) -> sqlite3.Connection:
        if self._pid != forks.pid():  # a forked worker never uses its parent's connection
            self._local, self._pid = threading.local(), forks.pid()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=5.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("PRAGMA busy_timeout=5000")
            self._local.conn = conn
        return conn


_FILES: dict[Path, SQLiteState] = {}


def shared_state_file(settings: Any) -> SQLiteState:
    """The state file of the server's data dir (one object per file, whoever asks)."""
    path = settings.dirs["data"] / "state.db"
    state = _FILES.get(path)
    if state is None:
        state = _FILES[path] = SQLiteState(path)
    return state


class SQLiteLimiter:
    """The fixed-window limiter of ratelimit.py, with its counters in the shared state file."""

    _HIT = (
        "INSERT INTO buckets(bucket, tool, win, count) VALUES (?, ?, ?, 1) "
        "ON CONFLICT(bucket, tool) DO UPDATE SET "
        "count = CASE WHEN win = excluded.win THEN count + 1 ELSE 1 END, win = excluded.win "
        "RETURNING count"
    )

    def __init__(self, state: SQLiteState, calls: int, window: float) -> None:
        self.state = state
        self.calls = calls
        self.window = window

    async def hit(self, bucket: str, key: str) -> float | None:
        now = time.time()
        index = int(now // self.window)
        # One statement: the read, the increment and the window reset are one atomic step for every worker.
        # A call over the limit still counts (as with Redis): the window's verdict does not change.
        row = self.state.conn().execute(self._HIT, (bucket, key, index)).fetchone()
        if int(row[0]) <= self.calls:
            return None
        return float(max(1, math.ceil((index + 1) * self.window - now)))

    async def peek(self, bucket: str, key: str) -> tuple[int, float]:
        """(calls counted in the current window, seconds until it resets), counting nothing."""
        now = time.time()
        index = int(now // self.window)
        row = (
            self.state.conn()
            .execute("SELECT count FROM buckets WHERE bucket=? AND tool=? AND win=?", (bucket, key, index))
            .fetchone()
        )
        return (int(row[0]) if row else 0), (index + 1) * self.window - now


class SQLiteSessions:
    """Session values of fn tools (`get_session` / `set_session`), shared by every worker."""

    def __init__(self, state: SQLiteState, ttl: float = SESSION_TTL) -> None:
        self.state = state
        self.ttl = ttl
        self._saves = 0

    async def load(self, sid: str) -> dict[str, Any]:
        row = self.state.conn().execute("SELECT data, touched FROM sessions WHERE sid=?", (sid,)).fetchone()
        if row is None or time.time() - row[1] > self.ttl:
            return {}
        value = json.loads(row[0])
        return value if isinstance(value, dict) else {}

    async def save(self, sid: str, values: dict[str, Any]) -> None:
        conn = self.state.conn()
        now = time.time()
        conn.execute(
            "INSERT INTO sessions(sid, data, touched) VALUES (?, ?, ?) "
            "ON CONFLICT(sid) DO UPDATE SET data = excluded.data, touched = excluded.touched",
            (sid, json.dumps(values, default=str), now),
        )
        self._saves += 1
        if self._saves % 1000 == 0:
            conn.execute("DELETE FROM sessions WHERE touched < ?", (now - self.ttl,))


class SQLiteMcpSessions:
    """MCP sessions (handshake era): which `Mcp-Session-Id`s exist, and whose each one is."""

    def __init__(self, state: SQLiteState, ttl: float = SESSION_TTL) -> None:
        self.state = state
        self.ttl = ttl
        self._opened = 0

    async def open(self, sid: str, owner: str) -> None:
        conn = self.state.conn()
        now = time.time()
        conn.execute("INSERT OR REPLACE INTO mcp_sessions(sid, owner, touched) VALUES (?, ?, ?)", (sid, owner, now))
        self._opened += 1
        if self._opened % 1000 == 0:
            conn.execute("DELETE FROM mcp_sessions WHERE touched < ?", (now - self.ttl,))

    async def owner(self, sid: str) -> str | None:
        """The session's owner, or None when it does not exist (never opened, closed or expired)."""
        conn = self.state.conn()
        row = conn.execute("SELECT owner, touched FROM mcp_sessions WHERE sid=?", (sid,)).fetchone()
        if row is None:
            return None
        now = time.time()
        if now - row[1] > self.ttl:
            return None
        if now - row[1] > 60:  # an idle session's clock restarts when it is used (written at most once a minute)
            conn.execute("UPDATE mcp_sessions SET touched=? WHERE sid=?", (now, sid))
        return str(row[0])

    async def close(self, sid: str) -> None:
        self.state.conn().execute("DELETE FROM mcp_sessions WHERE sid=?", (sid,))


class MemoryMcpSessions:
    """One process's sessions (a single worker without Redis); idle ones expire, at most `max_sessions`."""

    def __init__(self, max_sessions: int = 10_000, ttl: float = SESSION_TTL) -> None:
        self.max_sessions = max_sessions
        self.ttl = ttl
        self._owners: OrderedDict[str, tuple[str, float]] = OrderedDict()

    async def open(self, sid: str, owner: str) -> None:
        self._owners[sid] = (owner, time.monotonic())
        while len(self._owners) > self.max_sessions:
            self._owners.popitem(last=False)

    async def owner(self, sid: str) -> str | None:
        entry = self._owners.get(sid)
        if entry is None:
            return None
        now = time.monotonic()
        if now - entry[1] > self.ttl:
            del self._owners[sid]
            return None
        self._owners[sid] = (entry[0], now)
        self._owners.move_to_end(sid)
        return entry[0]

    async def close(self, sid: str) -> None:
        self._owners.pop(sid, None)
