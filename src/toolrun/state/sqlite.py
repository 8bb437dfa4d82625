"""The SQLite engine: state in files of the data dir, shared by every process of one machine.

- `toolrun.db`: users and keys (`SQLiteKeyStore`), shared by the CLI (`toolrun keys`) and a running server.
- `state.db` (`SQLiteState`): what the worker processes of one `toolrun serve --workers N` must agree on
  without `redis_url`: the rate-limit buckets, the session values of fn tools, the MCP sessions, and the
  jobs (for every server, and the local `toolrun jobs`: jobs outlive a restart).

Both files are 0600 in a 0700 folder (files.py) and in WAL mode. Each operation on `state.db` is one short
statement, atomic across processes (SQLite serialises writers with a file lock; `busy_timeout` makes a
writer wait its turn, for microseconds, instead of failing). `state.db` is `synchronous=OFF`: this is
state a power cut may lose (a rate window, a session), not records; the key store keeps SQLite's default
durability in its own file.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ..exec import pidcache
from ..keyrules import KeyRecord, NewKey, User, groups_for_new_key, hash_key, now, split_key, validate_user_fields
from .files import private_file
from .jobindex import columns
from .kinds import LIVE, Cursor, Versioned, Viewer

T = TypeVar("T")

SESSION_TTL = 24 * 3600.0
_STATE_SCHEMA = """
CREATE TABLE IF NOT EXISTS buckets (
    bucket TEXT NOT NULL, tool TEXT NOT NULL, win INTEGER NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (bucket, tool)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (sid TEXT PRIMARY KEY, data TEXT NOT NULL, touched REAL NOT NULL);
CREATE TABLE IF NOT EXISTS mcp_sessions (sid TEXT PRIMARY KEY, owner TEXT NOT NULL, touched REAL NOT NULL);
"""
_JOBS_SCHEMA = """CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, v INTEGER NOT NULL, created REAL NOT NULL, data TEXT NOT NULL)"""
# What a job keeps beside its record (jobindex.columns), added to files made before them and filled in once.
_JOB_COLUMNS = {
    "state": "TEXT",
    "requester": "TEXT",
    "tool": "TEXT",
    "approvers": "TEXT",
    "expires_at": "REAL",
    "heartbeat": "REAL",
    "finished": "REAL",
}
_JOB_INDEXES = """
CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created, id);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, created, id);
CREATE INDEX IF NOT EXISTS jobs_requester ON jobs(requester, state);
CREATE INDEX IF NOT EXISTS jobs_tool ON jobs(tool, state);
CREATE INDEX IF NOT EXISTS jobs_expires ON jobs(state, expires_at);
CREATE INDEX IF NOT EXISTS jobs_heartbeat ON jobs(state, heartbeat);
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs(finished);
"""
_JOB_BACKFILL = (
    "UPDATE jobs SET state = json_extract(data, '$.state'), requester = json_extract(data, '$.requester.person'), "
    "tool = json_extract(data, '$.tool'), approvers = json_extract(data, '$.approvers'), "
    "expires_at = json_extract(data, '$.expires_at'), heartbeat = json_extract(data, '$.heartbeat'), "
    "finished = json_extract(data, '$.finished') WHERE state IS NULL AND json_extract(data, '$.state') IS NOT NULL"
)
VACUUM_PAGES = 256  # free pages (1 MiB of 4 KiB pages) after a purge beyond which the file is shrunk
_KEYS_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    username TEXT PRIMARY KEY, email TEXT NOT NULL DEFAULT '',
    groups_json TEXT NOT NULL DEFAULT '[]', created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS keys (
    prefix TEXT PRIMARY KEY, username TEXT NOT NULL REFERENCES users(username),
    hash TEXT NOT NULL, created_at REAL NOT NULL,
    expires_at REAL, revoked_at REAL);
"""


class SQLiteFile:
    """One SQLite file (0600 in a 0700 folder), one connection per process and thread; reopened after a fork."""

    def __init__(self, path: Path, pragmas: tuple[str, ...] = ()) -> None:
        self.path = private_file(path)
        self.pragmas = ("PRAGMA journal_mode=WAL", *pragmas, "PRAGMA busy_timeout=5000")
        self.local = threading.local()
        self._pid = pidcache.pid()

    def conn(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use (a forked worker opens its own)."""
        if self._pid != pidcache.pid():  # a forked worker never uses its parent's connection
            self.local, self._pid = threading.local(), pidcache.pid()
        conn: sqlite3.Connection | None = getattr(self.local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=5.0, isolation_level=None, check_same_thread=False)
            for pragma in self.pragmas:
                conn.execute(pragma)
            self.local.conn = conn
        return conn


class SQLiteState(SQLiteFile):
    """The state file (`state.db`) the workers of one server share."""

    def __init__(self, path: Path) -> None:
        # secure_delete: a freed page or cell is zeroed, so a value a job no longer holds (a secret scrubbed when
        # it ended) is not left behind in the file.
        super().__init__(path, ("PRAGMA synchronous=OFF", "PRAGMA secure_delete=ON"))
        conn = self.conn()
        if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
            # Incremental auto-vacuum, so that the space of dropped jobs goes back to the disk (SQLiteJobStore.purge);
            # a file made before it needs one VACUUM to take the mode (another process busy with it: next start).
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            with contextlib.suppress(sqlite3.OperationalError):
                conn.execute("VACUUM")
        conn.executescript(_STATE_SCHEMA)


_FILES: dict[Path, SQLiteState] = {}


def state_file(data_dir: Path) -> SQLiteState:
    """The state file of a data dir (one object per file, whoever asks)."""
    path = data_dir / "state.db"
    state = _FILES.get(path)
    if state is None:
        state = _FILES[path] = SQLiteState(path)
    return state


class SQLiteLimiter:
    """Fixed windows (kinds.Limiter), their counters in the state file."""

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
    """Session values of fn tools (kinds.SessionStore), shared by every worker."""

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
    """MCP sessions (kinds.McpSessionStore) in the state file."""

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


_JOB_THREADS: tuple[int, ThreadPoolExecutor] | None = None


def _job_threads() -> ThreadPoolExecutor:
    """This process's threads for the job store's work (a forked worker makes its own): apart from asyncio's
    default executor, so no other work queued there delays a job's read, and at most 4 connections to the file."""
    global _JOB_THREADS
    if _JOB_THREADS is None or _JOB_THREADS[0] != pidcache.pid():
        _JOB_THREADS = (pidcache.pid(), ThreadPoolExecutor(4, thread_name_prefix="toolrun-jobs"))
    return _JOB_THREADS[1]


class SQLiteJobStore:
    """Jobs (kinds.JobStore) in the state file; each operation is one statement (atomic across processes), run in
    a thread so that neither the file nor the parsing of records ever holds the event loop. Counts, pages and the
    sweep read the indexed columns (`_JOB_COLUMNS`); only the records a page or a sweep returns are parsed."""

    def __init__(self, state: SQLiteState) -> None:
        self.state = state
        conn = state.conn()
        conn.execute(_JOBS_SCHEMA)
        have = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
        for name, kind in _JOB_COLUMNS.items():
            if name not in have:
                with contextlib.suppress(sqlite3.OperationalError):  # another process added it first
                    conn.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")
        conn.executescript(_JOB_INDEXES)
        if not have.issuperset(_JOB_COLUMNS):
            conn.execute(_JOB_BACKFILL)

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(_job_threads(), lambda: work(self.state.conn()))

    @staticmethod
    def _row(record: dict[str, Any]) -> tuple[Any, ...]:
        c = columns(record)
        return (
            c["state"],
            c["requester"],
            c["tool"],
            json.dumps(c["approvers"]),
            c["expires_at"],
            c["heartbeat"],
            c["finished"],
        )

    async def create(self, record: dict[str, Any]) -> None:
        values = (record["id"], record["created"], json.dumps(record), *self._row(record))
        sql = (
            "INSERT INTO jobs(id, v, created, data, state, requester, tool, approvers, expires_at, heartbeat, "
            "finished) VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        await self._run(lambda conn: conn.execute(sql, values))

    async def get(self, job_id: str) -> Versioned | None:
        def work(conn: sqlite3.Connection) -> Versioned | None:
            row = conn.execute("SELECT v, data FROM jobs WHERE id=?", (job_id,)).fetchone()
            return None if row is None else (int(row[0]), json.loads(row[1]))

        return await self._run(work)

    async def swap(self, job_id: str, version: int, record: dict[str, Any], keep: float | None = None) -> bool:
        values = (json.dumps(record), *self._row(record), job_id, version)
        sql = (
            "UPDATE jobs SET v = v + 1, data = ?, state = ?, requester = ?, tool = ?, approvers = ?, expires_at = ?, "
            "heartbeat = ?, finished = ? WHERE id = ? AND v = ?"
        )

        def work(conn: sqlite3.Connection) -> bool:
            swapped = conn.execute(sql, values).rowcount == 1
            if swapped and keep is not None:
                _drop_old_pages(conn)
            return bool(swapped)

        return await self._run(work)

    async def all(self) -> list[Versioned]:
        def work(conn: sqlite3.Connection) -> list[Versioned]:
            rows = conn.execute("SELECT v, data FROM jobs ORDER BY created").fetchall()
            return [(int(v), json.loads(data)) for v, data in rows]

        return await self._run(work)

    async def delete(self, job_id: str) -> None:
        await self._run(lambda conn: conn.execute("DELETE FROM jobs WHERE id=?", (job_id,)))

    async def page(
        self, *, state: str | None, viewer: Viewer | None, before: Cursor | None, limit: int
    ) -> list[Versioned]:
        where: list[str] = []
        args: list[Any] = []
        if state is not None:
            where.append("state = ?")
            args.append(state)
        if before is not None:
            where.append("(created < ? OR (created = ? AND id < ?))")
            args += [before[0], before[0], before[1]]
        if viewer is not None:
            groups = sorted(viewer.groups)
            marks = ", ".join("?" * len(groups))
            seen = f" OR EXISTS (SELECT 1 FROM json_each(jobs.approvers) WHERE value IN ({marks}))" if groups else ""
            where.append(f"(requester = ?{seen})")
            args += [viewer.person, *groups]
        sql = "SELECT v, data FROM jobs" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY created DESC, id DESC LIMIT ?"

        def work(conn: sqlite3.Connection) -> list[Versioned]:
            rows = conn.execute(sql, (*args, limit)).fetchall()
            return [(int(v), json.loads(data)) for v, data in rows]

        return await self._run(work)

    async def counts(self) -> dict[str, int]:
        def work(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
            return {str(state or ""): int(n) for state, n in rows}

        return await self._run(work)

    async def live(self, requester: str) -> dict[str, int]:
        sql = f"SELECT state, COUNT(*) FROM jobs WHERE requester = ? AND state IN ({', '.join('?' * len(LIVE))}) "
        sql += "GROUP BY state"

        def work(conn: sqlite3.Connection) -> dict[str, int]:
            return {**dict.fromkeys(LIVE, 0), **dict(conn.execute(sql, (requester, *LIVE)).fetchall())}

        return await self._run(work)

    async def due(self, moment: float, beat_before: float) -> list[Versioned]:
        sql = (
            "SELECT v, data FROM jobs WHERE state = ? AND expires_at <= ? UNION ALL "
            "SELECT v, data FROM jobs WHERE state = ? AND (heartbeat IS NULL OR heartbeat < ?)"
        )

        def work(conn: sqlite3.Connection) -> list[Versioned]:
            rows = conn.execute(sql, (LIVE[0], moment, LIVE[1], beat_before)).fetchall()
            return [(int(v), json.loads(data)) for v, data in rows]

        return await self._run(work)

    async def purge(self, finished_before: float) -> int:
        def work(conn: sqlite3.Connection) -> int:
            gone = conn.execute("DELETE FROM jobs WHERE finished < ?", (finished_before,)).rowcount
            if gone and conn.execute("PRAGMA freelist_count").fetchone()[0] > VACUUM_PAGES:
                # The pages of the dropped records go back to the disk (auto_vacuum=INCREMENTAL), and the
                # write-ahead log that carried them is emptied.
                conn.executescript("PRAGMA incremental_vacuum;")  # executescript: stepped to its end (execute: 1 page)
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            return int(gone)

        return await self._run(work)


def _drop_old_pages(conn: sqlite3.Connection) -> None:
    """A job ended: copy the write-ahead log into the file and empty it, so the earlier versions of the record (its
    secret arguments) do not stay in `state.db-wal`. Never waits: when a reader holds the log, the next end does it."""
    conn.execute("PRAGMA busy_timeout=0")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.OperationalError:
        pass
    finally:
        conn.execute("PRAGMA busy_timeout=5000")


_MEMO_MAX = 4096  # resolved keys remembered per connection
_USER_COLUMNS = "username, email, groups_json, created_at"


def _user(row: Any) -> User:
    return User(row[0], row[1], tuple(json.loads(row[2])), row[3])


class SQLiteKeyStore:
    """Users and keys (kinds.KeyStore) in one SQLite file (WAL mode; safe across the CLI and a running server)."""

    def __init__(self, path: Path) -> None:
        self.file = SQLiteFile(path)
        self.path = self.file.path
        with self.file.conn() as conn:
            conn.executescript(_KEYS_SCHEMA)

    def add_key(self, new: NewKey) -> None:
        record, groups, email = new.record, list(new.groups), new.email
        prefix, username, created, expires = record.prefix, record.username, record.created_at, record.expires_at
        conn = self.file.conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT email, groups_json FROM users WHERE username=?", (username,)).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO users(username, email, groups_json, created_at) VALUES (?,?,?,?)",
                    (username, email, json.dumps(sorted(set(groups))), created),
                )
            else:
                kept = groups_for_new_key(username, json.loads(row[1]), groups, new.set_groups)
                conn.execute(
                    "UPDATE users SET email=?, groups_json=? WHERE username=?",
                    (email or row[0], json.dumps(kept), username),
                )
            conn.execute(
                "INSERT INTO keys(prefix, username, hash, created_at, expires_at) VALUES (?,?,?,?,?)",
                (prefix, username, new.hash, created, expires),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def resolve(self, key: str) -> User | None:
        prefix = split_key(key)
        if prefix is None:
            return None
        conn = self.file.conn()
        local = self.file.local  # after conn(): this process's, even in a forked worker
        digest = hash_key(key)
        # Keys that resolved are remembered per connection until the database changes: `PRAGMA data_version`
        # moves when any other connection (another worker, `toolrun keys revoke`, another thread) commits, and
        # `total_changes` when this one writes. A revocation counts at the next request, as without the memo; an
        # expiry or a revocation time is checked at every use. About 12 us a request instead of 27.
        version = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        memo: dict[str, tuple[User, float | None, float | None]] | None = getattr(local, "memo", None)
        if memo is None or local.memo_version != version:
            memo = local.memo = {}
            local.memo_version = version
        entry = memo.get(digest)
        if entry is None:
            entry = self._lookup(conn, prefix, key, digest)
            if entry is None:
                return None
            if len(memo) >= _MEMO_MAX:  # bounded: only keys that resolved get in, and the memo starts over
                memo.clear()
            memo[digest] = entry
        user, expires, revoked = entry
        at = now()
        if (revoked is not None and revoked <= at) or (expires is not None and expires <= at):
            return None
        return user

    @staticmethod
    def _lookup(
        conn: sqlite3.Connection, prefix: str, key: str, digest: str
    ) -> tuple[User, float | None, float | None] | None:
        """(user, expires_at, revoked_at) of the key, whatever its state; None when unknown or not this key."""
        row = conn.execute(
            "SELECT k.hash, k.expires_at, k.revoked_at, u.username, u.email, u.groups_json, u.created_at "
            "FROM keys k JOIN users u ON u.username = k.username WHERE k.prefix=?",
            (prefix,),
        ).fetchone()
        if row is None:
            hmac.compare_digest(digest, hash_key(key))  # same work for unknown prefixes
            return None
        if not hmac.compare_digest(row[0], digest):
            return None
        return _user(row[3:]), row[1], row[2]

    def inspect(self, key: str) -> tuple[KeyRecord, User] | None:
        """The record and owner of `key` whatever its state (revoked and expired too); None if unknown."""
        prefix = split_key(key)
        if prefix is None:
            return None
        row = (
            self.file.conn()
            .execute(
                "SELECT k.hash, k.created_at, k.expires_at, k.revoked_at, u.username, u.email, u.groups_json, "
                "u.created_at FROM keys k JOIN users u ON u.username = k.username WHERE k.prefix=?",
                (prefix,),
            )
            .fetchone()
        )
        if row is None or not hmac.compare_digest(row[0], hash_key(key)):
            return None
        return KeyRecord(prefix, row[4], row[1], row[2], row[3]), _user(row[4:])

    def revoke(self, prefix: str, at: float | None = None) -> bool:
        """Revoke now, or at `at` (a grace period); False when the key is unknown or stops working by then already:
        a revocation only ever comes sooner (a second rotation's grace pushed a scheduled one later)."""
        moment = now()
        when = moment if at is None else max(at, moment)
        cur = self.file.conn().execute(
            "UPDATE keys SET revoked_at=? WHERE prefix=? AND (revoked_at IS NULL OR revoked_at > ?)",
            (when, prefix, when),
        )
        return cur.rowcount > 0

    def get_user(self, username: str) -> User | None:
        sql = f"SELECT {_USER_COLUMNS} FROM users WHERE username=?"
        row = self.file.conn().execute(sql, (username,)).fetchone()
        return _user(row) if row else None

    def set_groups(self, username: str, groups: list[str]) -> bool:
        validate_user_fields(username, groups)
        cur = self.file.conn().execute(
            "UPDATE users SET groups_json=? WHERE username=?", (json.dumps(sorted(set(groups))), username)
        )
        return cur.rowcount > 0

    def delete_user(self, username: str) -> int | None:
        """Delete the user and revoke every key of theirs (the key records stay, revoked); None if unknown."""
        conn = self.file.conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM users WHERE username=?", (username,)).fetchone() is None:
                conn.execute("ROLLBACK")
                return None
            moment = now()
            cur = conn.execute(
                "UPDATE keys SET revoked_at=? WHERE username=? AND (revoked_at IS NULL OR revoked_at > ?)",
                (moment, username, moment),
            )
            conn.execute("DELETE FROM users WHERE username=?", (username,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return cur.rowcount

    def list_users(self) -> list[User]:
        rows = self.file.conn().execute(f"SELECT {_USER_COLUMNS} FROM users ORDER BY username").fetchall()
        return [_user(r) for r in rows]

    def list_keys(self) -> list[KeyRecord]:
        rows = (
            self.file.conn()
            .execute(
                "SELECT prefix, username, created_at, expires_at, revoked_at FROM keys ORDER BY created_at, prefix"
            )
            .fetchall()
        )
        return [KeyRecord(*r) for r in rows]

    def ping(self) -> None:
        self.file.conn().execute("SELECT 1").fetchone()

    # The server's async API: a local SQLite lookup takes microseconds, so it runs inline.
    async def aresolve(self, key: str) -> User | None:
        return self.resolve(key)

    async def alist_users(self) -> list[User]:
        return self.list_users()

    async def alist_keys(self) -> list[KeyRecord]:
        return self.list_keys()

    async def aping(self) -> None:
        self.ping()
