"""API keys and users as data, and the rules on them: what access/ (which makes and checks keys) and the key
stores of state/ (which keep them) share.

Keys are minted by access/ (`access.apikeys.mint`); the stores keep what it made (`NewKey`) and never mint.
A key looks like ``trk_<prefix>_<secret>``: the 10-character prefix identifies it in listings and
logs, the secret carries 256 bits of entropy. Only the SHA-256 of the whole key is stored (a fast
hash is right for random high-entropy keys; there is nothing to brute-force), compared in
constant time. The raw key is shown once, by `toolrun keys create`, and never again.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .errors import UsageError
from .models import Identity

# \Z, not $: `$` also matches before a final newline, and `admin1\n` would pass for a name printed as `admin1`.
KEY_RE = re.compile(r"^trk_([a-z0-9]{10})_([A-Za-z0-9_-]{20,100})\Z")
USERNAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}\Z")
GROUP_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")


def now() -> float:
    return time.time()


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def split_key(key: str) -> str | None:
    """The prefix of a well-formed key, or None."""
    match = KEY_RE.match(key)
    return match.group(1) if match else None


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


@dataclass(frozen=True, slots=True)
class NewKey:
    """A key that access/ minted, as a store keeps it (kinds.KeyStore.add_key): its record and its hash, never the
    key itself; the owner's email and groups for a new user, and whether they replace an existing user's groups."""

    record: KeyRecord
    hash: str
    groups: tuple[str, ...]
    email: str = ""
    set_groups: bool = False
