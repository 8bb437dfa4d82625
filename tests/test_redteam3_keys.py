"""A fourth red team (issue 34's "fresh red team"), on API keys: rotation and revocation driven through the real
`toolrun keys` command against both key stores (the SQLite file, a real Redis). Each test failed on the code before
its fix.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.binaries import require_binary
from support.servers import RedisServer, clean_env, toolrun_cli

pytestmark = [pytest.mark.timeout(120)]

HOUR, MONTH = 3600.0, 30 * 86400.0


@pytest.fixture(params=["sqlite", "redis"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    if request.param == "sqlite":
        yield clean_env(tmp_path / "home")
        return
    with RedisServer(tmp_path / "redis", require_binary("redis-server")) as redis:
        redis.start()
        yield clean_env(tmp_path / "home", {"SVC_REDIS_URL": redis.url})


def _store(env: dict[str, str]):  # type: ignore[no-untyped-def]
    from toolrun.settings import Settings
    from toolrun.state import open_keys

    return open_keys(Settings.load(environ=env))


def _revoked_at(env: dict[str, str], prefix: str) -> float | None:
    return next(r.revoked_at for r in _store(env).list_keys() if r.prefix == prefix)


def _create(env: dict[str, str]) -> str:
    done = toolrun_cli("keys", "create", "alice", "--group=ops", env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split("_")[1]


def test_a_second_rotation_cannot_push_a_keys_revocation_later(env: dict[str, str]) -> None:
    """`keys rotate P --grace 1h` schedules P's revocation an hour from now; P stays `active` until then, so a
    second `keys rotate P --grace 30d` (a nightly job rotating every active key, say) was accepted and moved the
    revocation 30 days later: a key being retired, a leaked one say, kept working a month, and every night's
    rotation pushed it again. Now the second rotation is refused with what to do instead, and neither store ever
    moves a revocation later."""
    prefix = _create(env)
    first = toolrun_cli("keys", "rotate", prefix, "--grace", "1h", env=env)
    assert first.returncode == 0, first.stderr
    scheduled = _revoked_at(env, prefix)
    assert scheduled is not None and scheduled <= time.time() + HOUR

    second = toolrun_cli("keys", "rotate", prefix, "--grace", "30d", env=env)
    assert second.returncode == 2, second.stderr
    assert f"key {prefix} was replaced already" in second.stderr and "keys revoke" in second.stderr
    assert _revoked_at(env, prefix) == scheduled

    # Below the CLI too: a later time never replaces a sooner one, a sooner one always does.
    store = _store(env)
    assert store.revoke(prefix, time.time() + MONTH) is False
    assert _revoked_at(env, prefix) == scheduled
    assert store.revoke(prefix) is True
    revoked = _revoked_at(env, prefix)
    assert revoked is not None and revoked <= time.time()


def test_a_revocation_now_racing_a_rotations_grace_is_never_undone(env: dict[str, str]) -> None:
    """`keys revoke P` (a leak) and a rotation's grace revocation of P racing: the Redis store read the record,
    then wrote its time, so the rotation's later time could land after the revocation and bring P back for the
    grace period. Both stores now decide and write in one step: whatever the order, P ends revoked."""
    for _ in range(20):
        prefix = _create(env)
        barrier = threading.Barrier(2)
        times = [None, time.time() + MONTH]
        threads = [threading.Thread(target=_revoke, args=(_store(env), prefix, at, barrier)) for at in times]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        revoked = _revoked_at(env, prefix)
        assert revoked is not None and revoked <= time.time(), "a revoked key came back for the grace period"


def _revoke(store, prefix: str, at: float | None, barrier: threading.Barrier) -> None:  # type: ignore[no-untyped-def]
    barrier.wait()
    store.revoke(prefix, at)
