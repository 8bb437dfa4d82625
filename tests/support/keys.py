"""API keys for the tests, minted the three ways a test needs one.

- `create_key(env, user, *groups)`: through the real CLI, `toolrun keys create`, into whatever store
  `env` selects (the SQLite file of its TOOLRUN_HOME, or the Redis of its SVC_REDIS_URL);
- `mint_key(home, user, groups)`: in-process, into the key store of the TOOLRUN_HOME `home`
  (the one a `toolrun serve` with that home reads);
- `mint_redis_key(url, user, *groups)`: in-process, straight into the Redis at `url`.

An in-process app (support.app) mints its own with `Server.key(...)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from toolrun.access import Access

from .servers import toolrun_cli


def create_key(env: Mapping[str, str], username: str, *groups: str) -> str:
    """A fresh API key from `toolrun keys create` (into whatever store `env` selects)."""
    flags = [f"--group={g}" for g in groups]
    done = toolrun_cli("keys", "create", username, *flags, env=env)
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip()
    assert key.startswith("trk_"), done.stdout
    return key


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
