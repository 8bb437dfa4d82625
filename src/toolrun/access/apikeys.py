"""Users, groups and API keys: reading a key from a request, durations, rotation.

The key's format and hash, the users' names and groups, and the rules on them live in `toolrun.keyrules`
(shared with the stores, and named here too); the stores that keep them are `toolrun.state`'s (kinds.KeyStore):
a SQLite file in the data dir by default, or Redis with a `redis_url`, so every replica sees a new or revoked key
at once.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..keyrules import (
    GROUP_RE,
    KEY_RE,
    USERNAME_RE,
    KeyRecord,
    NewKey,
    User,
    hash_key,
    iso,
    now,
    split_key,
    validate_user_fields,
)

if TYPE_CHECKING:
    from ..state import KeyStore

__all__ = [
    "GROUP_RE",
    "KEY_RE",
    "USERNAME_RE",
    "KeyRecord",
    "User",
    "iso",
    "key_from",
    "mint",
    "newest_key",
    "now",
    "parse_duration",
    "rotate_key",
    "split_key",
]


_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def new_key() -> tuple[str, str]:
    """A fresh (key, prefix)."""
    prefix = "".join(secrets.choice(_ALPHABET) for _ in range(10))
    return f"trk_{prefix}_{secrets.token_urlsafe(32)}", prefix


def mint(
    username: str, groups: list[str], email: str = "", expires_in: float | None = None, set_groups: bool = False
) -> tuple[str, NewKey]:
    """A new key for `username`, its owner and groups checked: the key (shown once) and what a store keeps of it."""
    validate_user_fields(username, groups)
    key, prefix = new_key()
    created = now()
    expires = created + expires_in if expires_in is not None else None
    record = KeyRecord(prefix, username, created, expires, None)
    return key, NewKey(record, hash_key(key), tuple(groups), email, set_groups)


def parse_duration(text: str) -> float:
    """`30d`, `12h`, `90m`, `3600s` or `3600` -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match:
        raise UsageError(f"--expires {text!r}: expected a duration like 30d, 12h, 90m")
    number = float(match.group(1))
    return number * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]


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
    key, minted = mint(user.username, [], user.email, expires_in)
    store.add_key(minted)
    new = minted.record
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
