"""Users, groups and API keys.

A key looks like ``trk_<prefix>_<secret>``: the 10-character prefix identifies it in listings and
logs, the secret carries 256 bits of entropy. Only the SHA-256 of the whole key is stored (a fast
hash is right for random high-entropy keys; there is nothing to brute-force), compared in
constant time. The raw key is shown once, by `toolrun keys create`, and never again.

Embedded default: a SQLite file in the data dir. With a `redis_url` the same records live in
Redis (see `redis_store.py`), so every replica sees a new or revoked key at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from . import forks
from .errors import UsageError
from .models import Identity
from .statefiles import private_file

KEY_RE = re.compile(r"^trk_([a-z0-9]{10})_([A-Za-z0-9_-]{20,100})$")
USERNAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}$")
GROUP_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def now() -> float:
    return time.time()


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def new_key() -> tuple[str, str]:
    """A fresh (key, prefix)."""
    prefix = "".join(secrets.choice(_ALPHABET) for _ in range(10))
    return f"trk_{prefix}_{secrets.token_urlsafe(32)}", prefix


def mint(username: str, groups: list[str], expires_in: float | None) -> tuple[str, str, float, float | None]:
    """Check a new key's owner and groups; return (key, prefix, created_at, expires_at)."""
    validate_user_fields(username, groups)
    key, prefix = new_key()
    created = now()
    return key, prefix, created, (created + expires_in if expires_in is not None else None)


def split_key(key: str) -> str | None:
    """The prefix of a well-formed key, or None."""
    match = KEY_RE.match(key)
    return match.group(1) if match else None


def parse_duration(text: str) -> float:
    """`30d`, `12h`, `90m`, `3600s` or `3600` -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match:
        raise UsageError(f"--expires {text!r}: expected a duration like 30d, 12h, 90m")
    number = float(match.group(1))
    return number * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]


@dataclass(frozen=True, slots=True)
class User:
    username: str
    email: str
    groups: tuple[str, ...]
    created_at: float

    def identity(self, client: str = "", key_prefix: str = "") -> Identity:
        return Identity(
            self.username, self.email, frozenset(self.groups), anonymous=False, client=client, key_prefix=key_prefix
        )


@dataclass(frozen=True, slots=True)
class KeyRecord:
    prefix: str
    username: str
    created_at: float
    expires_at: float | None
    revoked_at: float | None

    def state(self, at: float | None = None) -> str:
        """active, expired or revoked; a key whose revocation is scheduled (`keys rotate --grace`) is
        active until then."""
        at = now() if at is None else at
        if self.revoked_at is not None and self.revoked_at <= at:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= at:
            return "expired"
        return "active"

    def metadata(self) -> dict[str, Any]:
        """The `key` object of /users?keys=true: never the hash, never the key."""
        return {"prefix": self.prefix, "created_at": iso(self.created_at), "expires_at": iso(self.expires_at)}

    def details(self) -> dict[str, Any]:
        """The metadata with the revocation time and the state (`/users?keys=true`, `users show`)."""
        return {**self.metadata(), "revoked_at": iso(self.revoked_at), "state": self.state()}


class KeyStore(Protocol):
    def create_key(
        self,
        username: str,
        groups: list[str],
        email: str = "",
        expires_in: float | None = None,
        set_groups: bool = False,
    ) -> tuple[str, KeyRecord]: ...

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


def validate_user_fields(username: str, groups: list[str]) -> None:
    if not USERNAME_RE.match(username):
        raise UsageError(f"user name {username!r}: use letters, digits and _ . @ - (at most 64)")
    for group in groups:
        if not GROUP_RE.match(group):
            raise UsageError(f"group {group!r}: use letters, digits and _ . - (at most 64)")


_MEMO_MAX = 4096  # resolved keys remembered per connection


class SQLiteKeyStore:
    """Users and keys in one SQLite file (WAL mode; safe across the CLI and a running server)."""

    def __init__(self, path: Path) -> None:
        self.path = private_file(path)  # 0600 in a 0700 folder (statefiles.py)
        self._local = threading.local()
        self._pid = forks.pid()
        with self._conn() as conn:
            conn.executescript(
                """
                CREATE TABLE IF NOT EXISTS users (
                    username TEXT PRIMARY KEY, email TEXT NOT NULL DEFAULT '',
                    groups_json TEXT NOT NULL DEFAULT '[]', created_at REAL NOT NULL);
                CREATE TABLE IF NOT EXISTS keys (
                    prefix TEXT PRIMARY KEY, username TEXT NOT NULL REFERENCES users(username),
                    hash TEXT NOT NULL, created_at REAL NOT NULL,
                    expires_at REAL, revoked_at REAL);
                """
            )

    def _conn(self) -> sqlite3.Connection:
        if self._pid != forks.pid():  # a forked worker (`serve --workers`) opens its own connection
            self._local, self._pid = threading.local(), forks.pid()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=5.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=5000")
            self._local.conn = conn
        return conn

    def create_key(
        self,
        username: str,
        groups: list[str],
        email: str = "",
        expires_in: float | None = None,
        set_groups: bool = False,
    ) -> tuple[str, KeyRecord]:
        key, prefix, created, expires = mint(username, groups, expires_in)
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT email, groups_json FROM users WHERE username=?", (username,)).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO users(username, email, groups_json, created_at) VALUES (?,?,?,?)",
                    (username, email, json.dumps(sorted(set(groups))), created),
                )
            else:
                kept = groups_for_new_key(username, json.loads(row[1]), groups, set_groups)
                conn.execute(
                    "UPDATE users SET email=?, groups_json=? WHERE username=?",
                    (email or row[0], json.dumps(kept), username),
                )
            conn.execute(
                "INSERT INTO keys(prefix, username, hash, created_at, expires_at) VALUES (?,?,?,?,?)",
                (prefix, username, hash_key(key), created, expires),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return key, KeyRecord(prefix, username, created, expires, None)

    def resolve(self, key: str) -> User | None:
        prefix = split_key(key)
        if prefix is None:
            return None
        conn = self._conn()
        digest = hash_key(key)
        # Keys that resolved are remembered per connection until the database changes: `PRAGMA data_version`
        # moves when any other connection (another worker, `toolrun keys revoke`, another thread) commits, and
        # `total_changes` when this one writes. A revocation counts at the next request, as without the memo; an
        # expiry or a revocation time is checked at every use. About 12 us a request instead of 27.
        version = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        local = self._local
        memo: dict[str, tuple[User, float | None, float | None]] | None = getattr(local, "memo", None)
        if memo is None or local.memo_version != version:
            memo = local.memo = {}
            local.memo_version = version
        entry = memo.get(digest)
        if entry is None:
            row = conn.execute(
                "SELECT k.hash, k.expires_at, k.revoked_at, u.username, u.email, u.groups_json, u.created_at "
                "FROM keys k JOIN users u ON u.username = k.username WHERE k.prefix=?",
                (prefix,),
            ).fetchone()
            if row is None:
                hmac.compare_digest(digest, hash_key(key))  # same work for unknown prefixes
                return None
            stored, expires, revoked, username, email, groups, created = row
            if not hmac.compare_digest(stored, digest):
                return None
            entry = (User(username, email, tuple(json.loads(groups)), created), expires, revoked)
            if len(memo) >= _MEMO_MAX:  # bounded: only keys that resolved get in, and the memo starts over
                memo.clear()
            memo[digest] = entry
        user, expires, revoked = entry
        at = now()
        if (revoked is not None and revoked <= at) or (expires is not None and expires <= at):
            return None
        return user

    def inspect(self, key: str) -> tuple[KeyRecord, User] | None:
        """The record and owner of `key` whatever its state (revoked and expired too); None if unknown."""
        prefix = split_key(key)
        if prefix is None:
            return None
        row = (
            self._conn()
            .execute(
                "SELECT k.hash, k.created_at, k.expires_at, k.revoked_at, u.username, u.email, u.groups_json, "
                "u.created_at FROM keys k JOIN users u ON u.username = k.username WHERE k.prefix=?",
                (prefix,),
            )
            .fetchone()
        )
        if row is None or not hmac.compare_digest(row[0], hash_key(key)):
            return None
        record = KeyRecord(prefix, row[4], row[1], row[2], row[3])
        return record, User(row[4], row[5], tuple(json.loads(row[6])), row[7])

    def revoke(self, prefix: str, at: float | None = None) -> bool:
        """Revoke now, or at `at` (a grace period); False when the key is unknown or already revoked."""
        moment = now()
        cur = self._conn().execute(
            "UPDATE keys SET revoked_at=? WHERE prefix=? AND (revoked_at IS NULL OR revoked_at > ?)",
            (moment if at is None else at, prefix, moment),
        )
        return cur.rowcount > 0

    def get_user(self, username: str) -> User | None:
        row = (
            self._conn()
            .execute("SELECT username, email, groups_json, created_at FROM users WHERE username=?", (username,))
            .fetchone()
        )
        return User(row[0], row[1], tuple(json.loads(row[2])), row[3]) if row else None

    def set_groups(self, username: str, groups: list[str]) -> bool:
        validate_user_fields(username, groups)
        cur = self._conn().execute(
            "UPDATE users SET groups_json=? WHERE username=?", (json.dumps(sorted(set(groups))), username)
        )
        return cur.rowcount > 0

    def delete_user(self, username: str) -> int | None:
        """Delete the user and revoke every key of theirs (the key records stay, revoked); None if unknown."""
        conn = self._conn()
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
        rows = (
            self._conn()
            .execute("SELECT username, email, groups_json, created_at FROM users ORDER BY username")
            .fetchall()
        )
        return [User(r[0], r[1], tuple(json.loads(r[2])), r[3]) for r in rows]

    def list_keys(self) -> list[KeyRecord]:
        rows = (
            self._conn()
            .execute(
                "SELECT prefix, username, created_at, expires_at, revoked_at FROM keys ORDER BY created_at, prefix"
            )
            .fetchall()
        )
        return [KeyRecord(*r) for r in rows]

    def ping(self) -> None:
        self._conn().execute("SELECT 1").fetchone()

    # The server's async API: a local SQLite lookup takes microseconds, so it runs inline.
    async def aresolve(self, key: str) -> User | None:
        return self.resolve(key)

    async def alist_users(self) -> list[User]:
        return self.list_users()

    async def alist_keys(self) -> list[KeyRecord]:
        return self.list_keys()

    async def aping(self) -> None:
        self.ping()


def groups_for_new_key(username: str, current: list[str], asked: list[str], set_groups: bool) -> list[str]:
    """The groups a user has after `keys create`: a user's groups apply to every key they hold, so a
    new key never changes them silently. No --group keeps them; other groups need --set-groups."""
    current = sorted(set(current))
    wanted = sorted(set(asked))
    if not asked or wanted == current:
        return current
    if not set_groups:
        raise UsageError(
            f"user {username!r} has groups [{', '.join(current)}]; a key for [{', '.join(wanted)}] would change "
            f"them for every key {username} holds. Pass --set-groups to do so (or use `toolrun users set-groups`), "
            "or leave out --group to keep them"
        )
    return wanted


def rotate_key(
    store: KeyStore, prefix: str, grace: float = 0.0, expires_in: float | None = None
) -> tuple[str, KeyRecord, float]:
    """A new key for the owner of `prefix` (same user, same groups), and the old one revoked now or after
    `grace` seconds. Returns (new key, its record, when the old one stops working)."""
    record = next((r for r in store.list_keys() if r.prefix == prefix), None)
    if record is None:
        raise UsageError(f"no key with prefix {prefix!r} (see `toolrun keys list`)")
    state = record.state()
    if state != "active":
        raise UsageError(f"key {prefix} is {state}: only an active key can be rotated (create a new one instead)")
    user = store.get_user(record.username)
    if user is None:
        raise UsageError(f"key {prefix} belongs to {record.username!r}, who no longer exists")
    key, new = store.create_key(user.username, [], user.email, expires_in)
    until = now() + max(0.0, grace)
    store.revoke(prefix, until if grace > 0 else None)
    return key, new, until


def newest_key(records: list[KeyRecord], username: str) -> KeyRecord | None:
    """The user's newest key that still works, or None."""
    live = [r for r in records if r.username == username and r.state() == "active"]
    return max(live, key=lambda r: r.created_at) if live else None


def key_from(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """Spec 5: X-API-Key, then Authorization: Bearer, then ?api-key=; a header wins over the query."""
    value = headers.get("x-api-key")
    if value:
        return value.strip()
    auth = headers.get("authorization")
    if auth:
        scheme, _, token = auth.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    value = query.get("api-key")
    return value.strip() if value else None
