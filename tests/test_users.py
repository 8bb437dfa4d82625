"""Users and keys (issue 11.6) with the real `toolrun` command, on SQLite and on a real redis-server.

Group changes are explicit: `keys create` refuses to change an existing user's groups unless told
(`--set-groups`), `users set-groups` does it on purpose, `keys rotate` replaces a key (the old one
revoked at once or after a grace period), and `/users?keys=true` shows every key with its state.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.servers import RedisServer, ToolrunServer, clean_env, toolrun_cli

CATALOG = """
version: 1
group: ops
tools:
  - name: echo
    exec: printf hi
"""


@pytest.fixture(params=["sqlite", "redis"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    if request.param == "sqlite":
        yield clean_env(tmp_path / "home")
        return
    require_binary("redis-server")
    with RedisServer(tmp_path / "redis").start() as redis:
        yield clean_env(tmp_path / "home", {"SVC_REDIS_URL": redis.url})


def cli(env: dict[str, str], *words: str) -> Any:
    done = toolrun_cli(*words, env=env)
    return done


def ok_json(env: dict[str, str], *words: str) -> Any:
    done = toolrun_cli(*words, "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def whoami(url: str, key: str) -> httpx.Response:
    return httpx.get(url + "/whoami", headers={"X-API-Key": key})


def test_version() -> None:
    from toolrun import __version__

    done = toolrun_cli("--version", env=clean_env(Path("/nonexistent")))
    assert (done.returncode, done.stdout) == (0, f"toolrun {__version__}\n")


def test_keys_create_refuses_to_change_an_existing_users_groups_unless_asked(env: dict[str, str]) -> None:
    first = ok_json(env, "keys", "create", "alice", "-g", "ops")

    widened = cli(env, "keys", "create", "alice", "-g", "admin")
    assert widened.returncode == 2
    assert "alice" in widened.stderr and "--set-groups" in widened.stderr and "ops" in widened.stderr
    assert ok_json(env, "users", "show", "alice")["groups"] == ["ops"]

    same = ok_json(env, "keys", "create", "alice", "-g", "ops")  # the same groups: fine
    kept = ok_json(env, "keys", "create", "alice")  # no --group: the user's groups as they are
    assert len({first["prefix"], same["prefix"], kept["prefix"]}) == 3
    assert ok_json(env, "users", "show", "alice")["groups"] == ["ops"]

    ok_json(env, "keys", "create", "alice", "-g", "admin", "--set-groups")
    assert ok_json(env, "users", "show", "alice")["groups"] == ["admin"]  # replaced, not merged


def test_users_list_show_set_groups_and_delete(env: dict[str, str]) -> None:
    ok_json(env, "keys", "create", "alice", "-g", "ops", "--email", "alice@example.com")
    ok_json(env, "keys", "create", "bob", "-g", "finance")

    users = ok_json(env, "users", "list")
    assert [(u["username"], u["groups"], u["active_keys"]) for u in users] == [
        ("alice", ["ops"], 1),
        ("bob", ["finance"], 1),
    ]
    shown = ok_json(env, "users", "show", "alice")
    assert shown["email"] == "alice@example.com" and [k["state"] for k in shown["keys"]] == ["active"]

    changed = cli(env, "users", "set-groups", "alice", "-g", "ops", "-g", "db")
    assert changed.returncode == 0, changed.stderr
    assert "ops, db" in changed.stderr or "db, ops" in changed.stderr
    assert ok_json(env, "users", "show", "alice")["groups"] == ["db", "ops"]

    missing = cli(env, "users", "set-groups", "nobody", "-g", "x")
    assert missing.returncode == 2 and "nobody" in missing.stderr

    deleted = cli(env, "users", "delete", "bob")
    assert deleted.returncode == 0, deleted.stderr
    assert [u["username"] for u in ok_json(env, "users", "list")] == ["alice"]
    assert [k["state"] for k in ok_json(env, "keys", "list") if k["username"] == "bob"] == ["revoked"]
    assert cli(env, "users", "show", "bob").returncode == 2


def test_group_changes_and_rotation_reach_a_running_server(env: dict[str, str], tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG)
    server = ToolrunServer(tmp_path / "srv", catalog)
    server.env = env
    old = ok_json(env, "keys", "create", "alice", "-g", "ops")
    admin = ok_json(env, "keys", "create", "root", "-g", "admin")
    with server.start():
        assert whoami(server.url, old["key"]).json()["groups"] == ["ops"]
        assert cli(env, "users", "set-groups", "alice", "-g", "db").returncode == 0
        assert whoami(server.url, old["key"]).json()["groups"] == ["db"]  # every key of alice, at once

        # A grace keeps the old key working beside the new one (an hour: the checks inside it have all the time
        # they need on a loaded machine) ...
        rotated = ok_json(env, "keys", "rotate", old["prefix"], "--grace", "1h")
        assert rotated["revoked_prefix"] == old["prefix"] and rotated["username"] == "alice"
        assert whoami(server.url, rotated["key"]).status_code == 200
        assert whoami(server.url, old["key"]).status_code == 200  # inside the grace period

        listing = httpx.get(server.url + "/users?keys=true", headers={"X-API-Key": admin["key"]}).json()
        alice = next(u for u in listing if u["username"] == "alice")
        assert alice["key"]["prefix"] == rotated["prefix"]  # the newest key, as before
        states = {k["prefix"]: k for k in alice["keys"]}
        assert states[old["prefix"]]["state"] == "active" and states[old["prefix"]]["revoked_at"]
        assert states[rotated["prefix"]]["state"] == "active" and states[rotated["prefix"]]["revoked_at"] is None

        # ... and its end stops the old key, on the running server and in the listing (a second's grace, waited out
        # together with the second of a key that expires, checked below)
        expiring = ok_json(env, "keys", "create", "carol", "-g", "ops", "--expires", "1s")
        graced = ok_json(env, "keys", "rotate", rotated["prefix"], "--grace", "1s")
        rotated_at = time.monotonic()  # the grace began before now, the key's second before that
        assert graced["revoked_prefix"] == rotated["prefix"]
        time.sleep(max(0.0, rotated_at + 1.2 - time.monotonic()))
        assert whoami(server.url, rotated["key"]).status_code == 401
        assert whoami(server.url, graced["key"]).status_code == 200
        listing = httpx.get(server.url + "/users?keys=true", headers={"X-API-Key": admin["key"]}).json()
        alice = next(u for u in listing if u["username"] == "alice")
        states = {k["prefix"]: k for k in alice["keys"]}
        assert {prefix: k["state"] for prefix, k in states.items()} == {
            old["prefix"]: "active",  # its hour is not over
            rotated["prefix"]: "revoked",
            graced["prefix"]: "active",
        }

        now = ok_json(env, "keys", "rotate", graced["prefix"])  # no grace: the old key stops at once
        assert whoami(server.url, graced["key"]).status_code == 401
        assert whoami(server.url, now["key"]).status_code == 200

        listing = httpx.get(server.url + "/users?keys=true", headers={"X-API-Key": admin["key"]}).json()
        carol = next(u for u in listing if u["username"] == "carol")
        assert [(k["prefix"], k["state"]) for k in carol["keys"]] == [(expiring["prefix"], "expired")]


def test_rotating_an_unknown_or_revoked_key_is_a_clear_error(env: dict[str, str]) -> None:
    key = ok_json(env, "keys", "create", "alice", "-g", "ops")
    assert cli(env, "keys", "revoke", key["prefix"]).returncode == 0
    done = cli(env, "keys", "rotate", key["prefix"])
    assert done.returncode == 2 and key["prefix"] in done.stderr and "revoked" in done.stderr
    done = cli(env, "keys", "rotate", "zzzzzzzzzz")
    assert done.returncode == 2 and "zzzzzzzzzz" in done.stderr
