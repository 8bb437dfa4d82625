"""Access explanations: the one core function, on a real SQLite key store and the real limiter."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from support.catalogs import write_catalog
from toolrun.access import Access
from toolrun.access.explain import explain, explain_text, key_report, key_report_text
from toolrun.catalog import LoadOptions, load
from toolrun.models import ToolSpec
from toolrun.state.memory import MemoryLimiter
from toolrun.state.sqlite import SQLiteKeyStore

CATALOG = """\
group: ops
tools:
  - {name: disk, exec: df}
  - {name: status, exec: uptime, public: true}
  - {name: deploy, exec: "true", groups: [deployers]}
"""


def Limits(enabled: bool = True, calls: int = 3, window: int = 60) -> Any:
    """Settings with these three rate-limit values (what explain reads)."""
    from toolrun.settings import Settings

    flags = {"rate_limit.enabled": enabled, "rate_limit.calls": calls, "rate_limit.window": window}
    return Settings.load(flags, {})


@pytest.fixture
def tools(tmp_path: Path) -> dict[str, ToolSpec]:
    return load([write_catalog(tmp_path, CATALOG)], os.environ, LoadOptions()).tools


@pytest.fixture
def store(tmp_path: Path) -> SQLiteKeyStore:
    return SQLiteKeyStore(tmp_path / "keys.db")


def ask(tools: dict[str, ToolSpec], store: SQLiteKeyStore, user: str, key: str, **kw: Any) -> dict[str, Any]:
    return asyncio.run(explain(tool_key=key, tool=tools.get(key), username=user, store=store, **kw))


def test_a_matching_group_makes_a_tool_visible_and_names_the_match(tools: Any, store: SQLiteKeyStore) -> None:
    Access(store).create_key("alice", ["ops", "dev"])
    answer = ask(tools, store, "alice", "ops.disk")
    assert answer["visible"] and answer["callable"]
    assert answer["matched"] == [{"group": "ops", "tag": "ops"}]
    assert answer["reasons"] == ["alice's group 'ops' matches tag 'ops' of ops.disk"]
    assert answer["keys"][0]["state"] == "active"
    text = explain_text(answer)
    assert text.startswith("ops.disk for alice: visible and callable\n  because alice's group 'ops' matches tag 'ops'")


def test_no_matching_group_lists_both_sides(tools: Any, store: SQLiteKeyStore) -> None:
    Access(store).create_key("alice", ["ops"])
    answer = ask(tools, store, "alice", "ops.deploy")
    # ops.deploy carries the file's group `ops` too: alice sees it through that tag
    assert answer["visible"]
    Access(store).create_key("bob", ["dev"])
    answer = ask(tools, store, "bob", "ops.deploy")
    assert not answer["visible"] and not answer["callable"]
    assert answer["reasons"] == [
        "none of bob's groups (dev) is a tag of ops.deploy (ops, deployers), and it is not public"
    ]


def test_public_tools_are_visible_to_anyone_and_unknown_tools_to_nobody(tools: Any, store: SQLiteKeyStore) -> None:
    answer = ask(tools, store, "-", "ops.status")
    assert answer["visible"] and answer["tool"]["public"]
    assert "ops.status is public: anyone may see and call it, with or without a key" in answer["reasons"]
    answer = ask(tools, store, "nobody", "ops.disk")
    assert not answer["visible"]
    assert answer["reasons"][0] == "no user 'nobody' in the key store: such a caller is anonymous, public tools only"
    answer = ask(tools, store, "-", "ops.nope")
    assert not answer["visible"] and answer["tool"]["exists"] is False
    assert "no tool 'ops.nope' in the catalog" in answer["reasons"][-1]


def test_admins_see_everything(tools: Any, store: SQLiteKeyStore) -> None:
    Access(store).create_key("root", ["admin"])
    answer = ask(tools, store, "root", "ops.deploy")
    assert answer["visible"]
    assert answer["reasons"] == ["root is in group admin: admins see every tool"]


def test_a_user_whose_keys_are_revoked_or_expired_is_anonymous(tools: Any, store: SQLiteKeyStore) -> None:
    _, record = Access(store).create_key("carol", ["ops"])
    store.revoke(record.prefix)
    Access(store).create_key("carol", ["ops"], expires_in=-1)
    answer = ask(tools, store, "carol", "ops.disk")
    assert not answer["visible"]
    assert sorted(k["state"] for k in answer["keys"]) == ["expired", "revoked"]
    assert answer["reasons"][0].startswith("carol has no active key (")
    assert "but without an active key that is not used" in answer["reasons"][1]
    assert ask(tools, store, "carol", "ops.status")["visible"]


def test_the_rate_limit_bucket_is_read_without_counting_a_call(tools: Any, store: SQLiteKeyStore) -> None:
    Access(store).create_key("alice", ["ops"])
    limiter = MemoryLimiter(3, 60)
    for _ in range(2):
        assert asyncio.run(limiter.hit("user:alice", "ops.disk")) is None
    answer = ask(tools, store, "alice", "ops.disk", limiter=limiter, settings=Limits())
    rate = answer["rate_limit"]
    assert (rate["used"], rate["remaining"], rate["calls"]) == (2, 1, 3)
    assert 0 < rate["resets_in"] <= 60
    again = ask(tools, store, "alice", "ops.disk", limiter=limiter, settings=Limits())
    assert again["rate_limit"]["used"] == 2  # explaining counted nothing
    asyncio.run(limiter.hit("user:alice", "ops.disk"))
    full = ask(tools, store, "alice", "ops.disk", limiter=limiter, settings=Limits())
    assert full["visible"] and not full["callable"]
    assert full["reasons"][-1].startswith("rate limit reached: 3 of 3 calls; resets in ")
    assert "visible, but not callable right now" in explain_text(full)
    off = ask(tools, store, "alice", "ops.disk", limiter=None, settings=Limits(enabled=False))
    assert off["rate_limit"]["enabled"] is False
    assert off["rate_limit"]["from"]["rate_limit.enabled"] == "the command line"  # where the value came from
    remote = ask(tools, store, "alice", "ops.disk", limiter=None, settings=Limits())
    assert "(--url URL)" in remote["rate_limit"]["note"]


def test_key_report_says_whose_key_and_what_it_may_call(tools: Any, store: SQLiteKeyStore) -> None:
    key, _ = Access(store).create_key("alice", ["deployers"], email="a@example.com")
    found = store.inspect(key)
    assert found is not None
    report = key_report(*found, list(tools.values()))
    assert report["username"] == "alice" and report["valid"]
    assert report["tools"] == ["ops.deploy", "ops.status"]
    text = key_report_text(report)
    assert "belongs to alice <a@example.com>, groups: deployers" in text
    assert "may call (2): ops.deploy, ops.status" in text
    store.revoke(found[0].prefix)
    revoked = store.inspect(key)
    assert revoked is not None
    report = key_report(*revoked, list(tools.values()))
    assert not report["valid"] and report["key"]["state"] == "revoked"
    assert report["tools"] == ["ops.status"]
    assert store.inspect(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    assert store.inspect("not-a-key") is None


# -- the doors: `toolrun access explain`, `toolrun keys test`, GET /whoami?explain= (real processes) --


def test_access_explain_and_keys_test_commands(tmp_path: Path) -> None:
    import json

    from support.keys import create_key
    from support.servers import clean_env, toolrun_cli

    env = clean_env(tmp_path / "home")
    path = write_catalog(tmp_path, CATALOG)
    key = create_key(env, "alice", "deployers")
    done = toolrun_cli("access", "explain", "alice", "ops.deploy", "-c", str(path), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        "ops.deploy for alice: visible and callable",
        "  because alice's group 'deployers' matches tag 'deployers' of ops.deploy",
    ]
    assert "rate limit: off" in done.stdout
    denied = toolrun_cli("access", "explain", "alice", "ops.disk", "-c", str(path), "--json", env=env)
    assert denied.returncode == 1
    answer = json.loads(denied.stdout)
    assert (answer["visible"], answer["callable"], answer["matched"]) == (False, False, [])
    tested = toolrun_cli("keys", "test", key, "-c", str(path), env=env)
    assert tested.returncode == 0, tested.stderr
    assert tested.stdout.splitlines()[0].startswith(f"key {key[4:14]} belongs to alice, groups: deployers")
    assert "may call (2): ops.deploy, ops.status" in tested.stdout
    assert toolrun_cli("keys", "revoke", key[4:14], env=env).returncode == 0
    revoked = toolrun_cli("keys", "test", key, "-c", str(path), env=env)
    assert revoked.returncode == 1 and "state: revoked" in revoked.stdout
    unknown = toolrun_cli("keys", "test", key[:-2] + "zz", env=env)
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("toolrun: unknown key: no key in the store matches it")


def test_whoami_explain_on_a_real_server_shows_the_live_rate_limit_bucket(tmp_path: Path) -> None:
    import httpx

    from support.http import JSON
    from support.keys import create_key
    from support.servers import ToolrunServer

    path = write_catalog(tmp_path, CATALOG)
    settings = {"SVC_RATE_LIMIT_ENABLED": True, "SVC_RATE_LIMIT_CALLS": 5, "SVC_RATE_LIMIT_WINDOW": 3600}
    with ToolrunServer(tmp_path / "srv", path, settings) as server:
        admin = create_key(server.env, "root", "admin")
        alice = create_key(server.env, "alice", "ops")
        server.start()
        for _ in range(2):
            httpx.post(server.url + "/tools/ops.disk", headers={**JSON, "X-API-Key": alice}, content=b"{}")
        answer = httpx.get(
            server.url + "/whoami", params={"explain": "ops.disk", "user": "alice"}, headers={"X-API-Key": admin}
        )
        assert answer.status_code == 200
        body = answer.json()
        assert body["username"] == "root" and "ops.disk" in body["tools"]
        explained = body["explain"]
        assert explained["visible"] and explained["callable"]
        assert explained["matched"] == [{"group": "ops", "tag": "ops"}]
        assert (explained["rate_limit"]["used"], explained["rate_limit"]["remaining"]) == (2, 3)
        # not an admin: no explanations (they name hidden tools)
        refused = httpx.get(server.url + "/whoami", params={"explain": "ops.deploy"}, headers={"X-API-Key": alice})
        assert refused.status_code == 401 and refused.json() == {"error": "unauthorized"}
        plain = httpx.get(server.url + "/whoami", headers={"X-API-Key": alice})
        assert plain.status_code == 200 and "explain" not in plain.json()


def test_explain_and_key_report_over_redis_read_the_shared_bucket(tmp_path: Path, tools: Any) -> None:
    from support.binaries import require_binary
    from support.servers import RedisServer
    from toolrun.state.redis import RedisKeyStore, RedisLimiter

    binary = require_binary("redis-server")
    with RedisServer(tmp_path / "redis", binary) as server:
        server.start()
        store = RedisKeyStore(server.url)
        key, record = Access(store).create_key("dana", ["ops"])
        limiter = RedisLimiter(store, 4, 3600)

        async def scenario() -> dict[str, Any]:
            try:
                for _ in range(3):
                    assert await limiter.hit("user:dana", "ops.disk") is None
                return await explain(
                    tool_key="ops.disk",
                    tool=tools["ops.disk"],
                    username="dana",
                    store=store,
                    limiter=limiter,
                    settings=Limits(calls=4, window=3600),
                )
            finally:
                await store.aio().aclose()

        answer = asyncio.run(scenario())
        assert (answer["rate_limit"]["used"], answer["rate_limit"]["remaining"]) == (3, 1)
        assert answer["keys"][0]["prefix"] == record.prefix
        found = store.inspect(key)
        assert found is not None and found[1].username == "dana"
        store.revoke(record.prefix)
        revoked = store.inspect(key)
        assert revoked is not None and revoked[0].state() == "revoked"
        assert store.inspect(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
        store.sync().close()


def test_access_explain_reads_the_servers_config_file_and_environment_and_says_where_each_value_came_from(
    tmp_path: Path,
) -> None:
    import json

    from support.keys import create_key
    from support.servers import clean_env, toolrun_cli

    env = clean_env(tmp_path / "home")
    path = write_catalog(tmp_path, CATALOG)
    create_key(env, "alice", "ops")
    off = toolrun_cli("access", "explain", "alice", "ops.disk", "-c", str(path), env=env)
    config = tmp_path / "home" / "config" / "config.toml"
    assert "rate limit: off (rate_limit.enabled from the default)" in off.stdout
    assert f"settings read from: the config file {config} (not found)" in off.stdout
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[rate_limit]\nenabled = true\ncalls = 5\n", encoding="utf-8")
    on = toolrun_cli(
        "access", "explain", "alice", "ops.disk", "-c", str(path), "--json", env={**env, "SVC_RATE_LIMIT_WINDOW": "30"}
    )
    rate = json.loads(on.stdout)["rate_limit"]
    assert (rate["enabled"], rate["calls"], rate["window"]) == (True, 5, 30)
    assert rate["from"] == {
        "rate_limit.enabled": str(config),
        "rate_limit.calls": str(config),
        "rate_limit.window": "SVC_RATE_LIMIT_WINDOW",
    }
    assert json.loads(on.stdout)["settings"] == {"config_file": str(config), "config_file_found": True}


def test_access_explain_with_url_asks_the_running_server_which_answers_from_its_own_flags(tmp_path: Path) -> None:
    import httpx

    from support.http import JSON
    from support.keys import create_key
    from support.servers import ToolrunServer, toolrun_cli

    path = write_catalog(tmp_path, CATALOG)
    with ToolrunServer(tmp_path / "srv", path) as server:
        admin = create_key(server.env, "root", "admin")
        alice = create_key(server.env, "alice", "ops")
        argv = [sys.executable, "-m", "toolrun", "serve", "-c", str(path), "--host", "127.0.0.1"]
        # A day's window: the minute's fixed window rolled over between the call and the question in a loaded run
        env = {**server.env, "SVC_RATE_LIMIT_WINDOW": "86400"}
        server.spawn([*argv, "--port", str(server.port), "--rate-limit", "--workers", "1"], env)
        server.ready()
        httpx.post(server.url + "/tools/ops.disk", headers={**JSON, "X-API-Key": alice}, content=b"{}")
        local = toolrun_cli("access", "explain", "alice", "ops.disk", "-c", str(path), env=server.env)
        assert "rate limit: off (rate_limit.enabled from the default)" in local.stdout  # this shell's settings
        asked = toolrun_cli(
            "access", "explain", "alice", "ops.disk", "--url", server.url, "--api-key", admin, env=server.env
        )
        assert asked.returncode == 0, asked.stderr
        assert "rate limit: 1 of 60 calls used in this 86400s window, 59 left" in asked.stdout
        assert "rate_limit.enabled from the command line" in asked.stdout
        assert f"answered by the server at {server.url}" in asked.stdout
        root = toolrun_cli(
            "--url", server.url, "--api-key", admin, "access", "explain", "alice", "ops.disk", env=server.env
        )
        assert root.returncode == 0 and "1 of 60 calls used" in root.stdout
        refused = toolrun_cli(
            "access", "explain", "alice", "ops.disk", "--url", server.url, "--api-key", alice, env=server.env
        )
        assert refused.returncode == 2
        assert refused.stderr == (
            "toolrun: the server explains access to admins only: pass an admin's key (--api-key or TOOLRUN_API_KEY)\n"
        )
