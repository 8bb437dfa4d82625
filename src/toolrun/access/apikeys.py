"""Users, groups and API keys.

A key looks like ``trk_<prefix>_<secret>``: the 10-character prefix identifies it in listings and
logs, the secret carries 256 bits of entropy. Only the SHA-256 of the whole key is stored (a fast
hash is right for random high-entropy keys; there is nothing to brute-force), compared in
constant time. The raw key is shown once, by `toolrun keys create`, and never again.

The key's format and hash, the users' names and groups, and the rules on them live here; the stores
that keep them are `toolrun.state`'s (kinds.KeyStore): a SQLite file in the data dir by default, or
Redis with a `redis_url`, so every replica sees a new or revoked key at once.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..models import Identity

if TYPE_CHECKING:
    from ..state import KeyStore

# \Z, not $: `$` also matches before a final newline, and `admin1\n` would pass for a name printed as `admin1`.
KEY_RE = re.compile(r"^trk_([a-z0-9]{10})_([A-Za-z0-9_-]{20,100})\Z")
USERNAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}\Z")
GROUP_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")
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
            self.username,
            self.email,
            frozenset(self.groups),
            anonymous=False,
            client=client,
            key_prefix=key_prefix,
            source="key",
            person=f"user:{self.username}",
            since=self.created_at,
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


def validate_user_fields(username: str, groups: list[str]) -> None:
    if not USERNAME_RE.match(username):
        raise UsageError(f"user name {username!r}: use letters, digits and _ . @ - (at most 64)")
    for group in groups:
        if not GROUP_RE.match(group):
            raise UsageError(f"group {group!r}: use letters, digits and _ . - (at most 64)")


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
    if record.revoked_at is not None:  # rotated before, its grace under way: a second grace would not extend it
        raise UsageError(
            f"key {prefix} was replaced already and stops working at {iso(record.revoked_at)}: rotate the key that "
            "replaced it (see `toolrun keys list`), or revoke this one now with `toolrun keys revoke`"
        )
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
