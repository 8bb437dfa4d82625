"""`toolrun keys create | list | revoke`, driven through the Typer app, checked against a server."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from support.app import servers
from toolrun.access.apikeys import KEY_RE, split_key
from toolrun.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def create(*args: str) -> str:
    result = runner.invoke(app, ["keys", "create", *args], env=WIDE)
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip()


def test_keys_create_prints_the_key_once_and_nothing_else_on_stdout() -> None:
    result = runner.invoke(app, ["keys", "create", "alice", "-g", "ops", "--email", "a@x", "--expires", "30d"])
    assert result.exit_code == 0, result.stderr
    key = result.stdout.removesuffix("\n")
    assert result.stdout == key + "\n"
    assert KEY_RE.match(key), key
    prefix = split_key(key)
    assert prefix is not None
    assert f"created key {prefix} for alice" in result.stderr
    assert "expires" in result.stderr and "shown only this once" in result.stderr
    assert key not in result.stderr


def test_keys_create_json_carries_the_key_and_its_metadata() -> None:
    result = runner.invoke(app, ["keys", "create", "bob", "--group", "admin", "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {"key", "prefix", "username", "expires_at"}
    assert data["prefix"] == split_key(data["key"])
    assert (data["username"], data["expires_at"]) == ("bob", None)


def test_a_created_key_authenticates_against_the_server(tmp_path: Path) -> None:
    key = create("alice", "-g", "ops", "--email", "a@x", "--expires", "30d")
    with servers(tmp_path) as make:
        server = make()
        response = server.client.get("/whoami", headers={"X-API-Key": key})
    assert response.status_code == 200
    assert response.json()["username"] == "alice"
    assert response.json()["email"] == "a@x"
    assert response.json()["groups"] == ["ops"]


def test_keys_create_with_a_bad_expiry_or_name_exits_2_with_a_message() -> None:
    bad_expiry = runner.invoke(app, ["keys", "create", "alice", "--expires", "soon"])
    assert bad_expiry.exit_code == 2
    assert "--expires 'soon'" in bad_expiry.stderr
    bad_name = runner.invoke(app, ["keys", "create", "no spaces"])
    assert bad_name.exit_code == 2
    assert "user name 'no spaces'" in bad_name.stderr
    assert runner.invoke(app, ["keys", "list", "--json"]).stdout.strip() == "[]"


def test_keys_list_shows_prefix_user_groups_created_expires_and_state_but_never_the_key() -> None:
    alice = create("alice", "-g", "ops", "-g", "dev", "--expires", "30d")
    bob = create("bob")
    result = runner.invoke(app, ["keys", "list"], env=WIDE)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.split(r"\s+", lines[0].strip()) == ["prefix", "user", "groups", "created", "expires", "state"]
    rows = {line.split()[0]: line for line in lines[1:] if line.strip()}
    alice_row = rows[str(split_key(alice))]
    assert "alice" in alice_row and "dev, ops" in alice_row and alice_row.rstrip().endswith("active")
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", alice_row)
    assert "never" in rows[str(split_key(bob))]
    for key in (alice, bob):
        assert key not in result.stdout + result.stderr
        assert key.split("_", 2)[2] not in result.stdout


def test_keys_list_json_has_one_record_per_key() -> None:
    key = create("alice", "-g", "ops")
    result = runner.invoke(app, ["keys", "list", "--json"])
    assert result.exit_code == 0
    records = json.loads(result.stdout)
    assert len(records) == 1
    record = records[0]
    assert set(record) == {"prefix", "username", "groups", "created_at", "expires_at", "state"}
    assert (record["prefix"], record["username"], record["groups"], record["state"]) == (
        split_key(key),
        "alice",
        ["ops"],
        "active",
    )
    assert key not in result.stdout


def test_keys_revoke_makes_the_key_get_401_and_a_second_revoke_exits_2(tmp_path: Path) -> None:
    key = create("alice", "-g", "ops")
    prefix = str(split_key(key))
    with servers(tmp_path) as make:
        server = make()
        assert server.client.get("/whoami", headers={"X-API-Key": key}).status_code == 200
        revoked = runner.invoke(app, ["keys", "revoke", prefix])
        assert revoked.exit_code == 0, revoked.stderr
        assert f"revoked key {prefix}" in revoked.stderr
        after = server.client.get("/whoami", headers={"X-API-Key": key})
        assert after.status_code == 401
        assert after.json() == {"error": "unauthorized"}
    again = runner.invoke(app, ["keys", "revoke", prefix])
    assert again.exit_code == 2
    assert f"no active key with prefix {prefix!r}" in again.stderr
    states = json.loads(runner.invoke(app, ["keys", "list", "--json"]).stdout)
    assert [s["state"] for s in states] == ["revoked"]


def test_keys_revoke_also_accepts_the_whole_key() -> None:
    key = create("alice")
    result = runner.invoke(app, ["keys", "revoke", key])
    assert result.exit_code == 0, result.stderr
    assert key not in result.stderr
    assert f"revoked key {split_key(key)}" in result.stderr


def test_keys_revoke_of_an_unknown_prefix_exits_2() -> None:
    result = runner.invoke(app, ["keys", "revoke", "nosuchpref"])
    assert result.exit_code == 2
    assert "no active key with prefix 'nosuchpref'" in result.stderr


def test_toolrun_keys_never_imports_the_server_stack(tmp_path: Path) -> None:
    """`toolrun keys` opens the key store through toolrun.access, not through the server's wiring."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")} | {"TOOLRUN_HOME": str(tmp_path)}
    code = "import sys; sys.argv = ['toolrun', 'keys', 'list', '--json']; from toolrun.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == []
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")}
    assert "toolrun.access" in imported
    assert not {m for m in imported if m.split(".")[0] in ("starlette", "uvicorn", "mcp", "prometheus_client")}
    assert not {m for m in imported if m.startswith("toolrun.server")}


def test_access_identifies_a_caller_per_mode(tmp_path: Path) -> None:
    import asyncio

    import pytest

    from toolrun.access import Access
    from toolrun.errors import Unauthorized
    from toolrun.state.sqlite import SQLiteKeyStore

    access = Access(SQLiteKeyStore(tmp_path / "keys.db"))
    user_key, _ = access.create_key("ann", ["ops"])
    admin_key, _ = access.create_key("root", ["admin"])
    assert (asyncio.run(access.identify(user_key, "anonymous", "10.0.0.1"))).anonymous
    assert (asyncio.run(access.identify(None, "optional", "10.0.0.1"))).bucket == "anon:10.0.0.1"
    assert (asyncio.run(access.identify(user_key, "optional"))).username == "ann"
    assert (asyncio.run(access.identify(None, "keyed"))).anonymous
    for key, mode in (
        (None, "required"),
        ("trk_bogus", "keyed"),
        ("trk_bogus", "optional"),
        (user_key, "admin"),
        ("trk_bogus", "required"),
    ):
        with pytest.raises(Unauthorized):
            asyncio.run(access.identify(key, mode))
    assert (asyncio.run(access.identify(admin_key, "admin"))).is_admin
    assert access.identify_now(user_key, "required", "stdio").groups == frozenset({"ops"})
    assert [row["username"] for row in access.key_rows()] == ["ann", "root"]
    assert [u["username"] for u in asyncio.run(access.users(with_keys=True))] == ["ann", "root"]
