"""API keys for the tests, minted the three ways a test needs one.

- `create_key(env, user, *groups)`: as `toolrun keys create` makes it (the settings of `env`, the same code), into
  whatever store `env` selects (the SQLite file of its TOOLRUN_HOME, or the Redis of its SVC_REDIS_URL), but in this
  process: a `toolrun` process per key cost about 0.1 s of CPU, and a test makes a key for each of its users (the
  command itself is tested as a command: tests/test_users.py, tests/test_cli*.py);
- `mint_key(home, user, groups)`: in-process, into the key store of the TOOLRUN_HOME `home`
  (the one a `toolrun serve` with that home reads);
- `mint_redis_key(url, user, *groups)`: in-process, straight into the Redis at `url`.

An in-process app (support.app) mints its own with `Server.key(...)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from toolrun.access import Access


def create_key(env: Mapping[str, str], username: str, *groups: str) -> str:
    """A fresh API key, as `toolrun keys create` makes it with the environment `env` (its settings, its store)."""
    from toolrun.settings import Settings
    from toolrun.state import open_keys

    store = open_keys(Settings.load(environ=env))
    try:
        key, _ = Access(store).create_key(username, list(groups))
    finally:
        close(store)
    assert key.startswith("trk_"), key
    return str(key)


def close(store: object) -> None:
    """Close a key store's connection (the SQLite file's of this thread, or the Redis client)."""
    file = getattr(store, "file", None)
    conn = getattr(file.local, "conn", None) if file is not None else None
    if conn is not None:
        conn.close()
        file.local.conn = None
    sync = getattr(store, "sync", None)
    if sync is not None:
        sync().close()


def mint_key(home: Path, username: str, groups: Sequence[str] = (), email: str = "") -> str:
    """A new API key in the key store of the TOOLRUN_HOME `home` (the one `toolrun serve` reads)."""
    from toolrun.settings import Settings
    from toolrun.state import open_keys

    settings = Settings.load(environ={"TOOLRUN_HOME": str(home)})
    key, _ = Access(open_keys(settings)).create_key(username, list(groups), email)
    return str(key)


def mint_redis_key(url: str, username: str, *groups: str) -> str:
    """A key minted in-process, straight into the Redis at `url` (the CLI's way is `create_key`)."""
    from toolrun.state.redis import RedisKeyStore

    store = RedisKeyStore(url)
    try:
        return Access(store).create_key(username, list(groups))[0]
    finally:
        store.sync().close()
