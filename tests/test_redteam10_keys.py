"""Red team 10 on the Redis key store (issue 34, an old weak point: the `create_key` race between two admins).

`toolrun keys create alice` (no `--group`: the user keeps the groups it has) read the user's groups, then wrote them
back with the new key. An admin who removed a group from alice in between (`toolrun users set-groups alice ops`, on
another machine against the same Redis) had that change undone: alice got `admin` back, with every key she holds,
and nothing said so. The second admin's change is made here exactly in that moment (between the read and the
write), by a second store of its own on the same real redis-server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from support.binaries import require_binary
from support.servers import RedisServer
from toolrun.access.apikeys import mint
from toolrun.state import redis as redis_state


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    with RedisServer(tmp_path / "redis", require_binary("redis-server")) as server:
        server.start()
        yield server.url


def test_a_new_key_never_brings_back_a_group_another_admin_removed_meanwhile(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the code before the fix alice had [admin, ops] after both admins were done."""
    first, second = redis_state.RedisKeyStore(url), redis_state.RedisKeyStore(url)
    first.add_key(mint("alice", ["admin", "ops"])[1])
    merge = redis_state.groups_for_new_key
    raced: list[bool] = []

    def meanwhile(username: str, current: list[str], asked: list[str], set_groups: bool) -> list[str]:
        if not raced:  # the other admin, between this store's read and its write
            raced.append(second.set_groups("alice", ["ops"]))
        return merge(username, current, asked, set_groups)

    monkeypatch.setattr(redis_state, "groups_for_new_key", meanwhile)
    first.add_key(mint("alice", [])[1])
    assert raced == [True]
    user = second.get_user("alice")
    assert user is not None and sorted(user.groups) == ["ops"], user
    assert len([k for k in second.list_keys() if k.username == "alice"]) == 2


def test_setting_the_groups_of_a_user_deleted_meanwhile_makes_no_half_user(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`users set-groups bob` checked that bob exists, then wrote his groups: bob deleted by another admin in between
    came back as a user with groups and nothing else, whose groups the next `keys create bob` then kept (admin, for a
    new bob). On the code before the fix bob was there after both admins were done."""
    first, second = redis_state.RedisKeyStore(url), redis_state.RedisKeyStore(url)
    first.add_key(mint("bob", ["ops"])[1])
    exists = redis.Redis.exists
    raced: list[object] = []

    def meanwhile(self: redis.Redis, *names: str) -> object:
        found = exists(self, *names)
        if not raced and names == (f"{redis_state.PREFIX}user:bob",):
            raced.append(None)  # before the other admin's own lookups
            raced[0] = second.delete_user("bob")
        return found

    monkeypatch.setattr(redis.Redis, "exists", meanwhile)
    answer = first.set_groups("bob", ["admin"])
    assert raced == [1]
    assert answer is False
    assert second.get_user("bob") is None


def test_a_key_made_while_its_user_is_deleted_never_serves_a_later_user_of_that_name(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`users delete bob` listed bob's keys, revoked them, then deleted bob: a key another admin made for bob in
    between (a rotation for the person being let go) stayed active, and once a new bob was created it was a key of
    the new bob. On the code before the fix it resolved to the new bob."""
    first, second = redis_state.RedisKeyStore(url), redis_state.RedisKeyStore(url)
    first.add_key(mint("bob", ["ops"])[1])
    late_key, late = mint("bob", [])
    zrange = redis.Redis.zrange
    raced: list[bool] = []

    def meanwhile(self: redis.Redis, *args: object, **kwargs: object) -> object:
        found = zrange(self, *args, **kwargs)  # type: ignore[arg-type]
        if not raced:  # the deleting admin has read the keys: the other admin adds one now
            raced.append(True)
            second.add_key(late)
        return found

    monkeypatch.setattr(redis.Redis, "zrange", meanwhile)
    first.delete_user("bob")
    monkeypatch.undo()
    assert raced == [True]
    second.add_key(mint("bob", ["admin"])[1])  # a new bob, someone else
    assert second.resolve(late_key) is None, "a key made for the deleted bob works for the new one"
