"""API keys: format, hashed storage, resolution, key sources, and keys never reaching a log line."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.app import Server, servers
from support.clock import key_clock
from support.http import JSON
from toolrun.access import Access
from toolrun.access.apikeys import KEY_RE, key_from, newest_key, parse_duration, split_key
from toolrun.errors import UsageError
from toolrun.server.guard import redact_query
from toolrun.state.sqlite import SQLiteKeyStore


@pytest.fixture
def store(tmp_path: Path) -> SQLiteKeyStore:
    return SQLiteKeyStore(tmp_path / "keys.db")


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    with servers(tmp_path) as factory:
        yield factory


# -- the key format and the store ----------------------------------------------------------------------


def test_a_new_key_is_prefixed_high_entropy_and_unique(store: SQLiteKeyStore) -> None:
    keys = [Access(store).create_key("alice", [])[0] for _ in range(20)]
    assert len(set(keys)) == 20
    for key in keys:
        match = KEY_RE.match(key)
        assert match is not None, key
        assert len(match.group(2)) >= 43  # 32 random bytes, urlsafe base64
        assert split_key(key) == match.group(1)
    assert len({split_key(k) for k in keys}) == 20


def test_the_store_keeps_only_the_sha256_never_the_key(store: SQLiteKeyStore) -> None:
    key, record = Access(store).create_key("alice", ["ops"])
    rows = sqlite3.connect(store.path).execute("SELECT * FROM keys").fetchall()
    dump = repr(rows)
    assert key not in dump and key.split("_", 2)[2] not in dump
    assert hashlib.sha256(key.encode()).hexdigest() in dump
    assert record.prefix in dump


def test_resolve_accepts_the_exact_key_only(store: SQLiteKeyStore) -> None:
    key, _ = Access(store).create_key("alice", ["ops"], email="a@x")
    user = store.resolve(key)
    assert user is not None
    assert (user.username, user.email, user.groups) == ("alice", "a@x", ("ops",))
    prefix = split_key(key)
    for wrong in (key + "x", key[:-1], f"trk_{prefix}_" + "A" * 43, key.upper(), "", "trk__", " " + key):
        assert store.resolve(wrong) is None, wrong


def test_expired_and_revoked_keys_do_not_resolve(store: SQLiteKeyStore) -> None:
    expired, expired_record = Access(store).create_key("bob", [], expires_in=-1.0)
    revoked, record = Access(store).create_key("carol", [])
    assert store.revoke(record.prefix) is True
    assert store.revoke(record.prefix) is False
    assert store.resolve(expired) is None
    assert store.resolve(revoked) is None
    states = {r.prefix: r.state() for r in store.list_keys()}
    assert states == {expired_record.prefix: "expired", record.prefix: "revoked"}


def test_a_remembered_key_stops_resolving_the_moment_it_is_revoked_or_changed_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """resolve() remembers keys that resolved; every change to the key store, from this store, another connection
    or another process (`toolrun keys revoke`), is seen at the next call, and an expiry counts without a change."""
    import subprocess
    import sys

    clock = key_clock(monkeypatch)
    store = SQLiteKeyStore(tmp_path / "keys.db")

    first, first_record = Access(store).create_key("dave", ["ops"])
    second, second_record = Access(store).create_key("erin", ["ops"])
    third, third_record = Access(store).create_key("frank", ["ops"])
    soon, _ = Access(store).create_key("gina", ["ops"], expires_in=60.0)  # a minute on the clock of this test
    for key in (first, second, third, soon):
        assert store.resolve(key) is not None and store.resolve(key) is not None  # remembered now
    assert store.revoke(first_record.prefix)  # this store's own connection
    assert store.resolve(first) is None
    assert SQLiteKeyStore(tmp_path / "keys.db").revoke(second_record.prefix)  # another connection
    assert store.resolve(second) is None
    script = (
        "import sys; from pathlib import Path; from toolrun.state.sqlite import SQLiteKeyStore; "
        f"SQLiteKeyStore(Path(sys.argv[1])).revoke({third_record.prefix!r})"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "keys.db")], check=True, timeout=60)
    assert store.resolve(third) is None  # another process
    other = SQLiteKeyStore(tmp_path / "keys.db")
    other.set_groups("gina", ["finance"])
    user = store.resolve(soon)
    assert user is not None and user.groups == ("finance",)  # a changed user is read again
    clock.advance(61)
    assert store.resolve(soon) is None  # expired while remembered


def test_a_second_key_never_changes_the_users_groups_unless_asked(store: SQLiteKeyStore) -> None:
    first, _ = Access(store).create_key("alice", ["ops"], email="a@x")
    with pytest.raises(UsageError, match="--set-groups"):
        Access(store).create_key("alice", ["dev"])  # would silently widen every key alice holds
    second, _ = Access(store).create_key("alice", [])  # no groups given: alice keeps hers
    for key in (first, second):
        user = store.resolve(key)
        assert user is not None and user.groups == ("ops",) and user.email == "a@x"
    Access(store).create_key("alice", ["dev"], set_groups=True)
    user = store.resolve(first)
    assert user is not None and user.groups == ("dev",)  # replaced, for every key
    assert [u.username for u in store.list_users()] == ["alice"]


def test_newest_key_ignores_revoked_and_expired_keys(store: SQLiteKeyStore) -> None:
    _, old = Access(store).create_key("alice", [])
    _, new = Access(store).create_key("alice", [])
    store.revoke(new.prefix)
    newest = newest_key(store.list_keys(), "alice")
    assert newest is not None and newest.prefix == old.prefix
    store.revoke(old.prefix)
    assert newest_key(store.list_keys(), "alice") is None


@pytest.mark.parametrize(("username", "groups"), [("", []), ("a b", []), ("x" * 65, []), ("ok", ["bad group"])])
def test_bad_user_names_and_groups_are_refused(store: SQLiteKeyStore, username: str, groups: list[str]) -> None:
    with pytest.raises(UsageError):
        Access(store).create_key(username, groups)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("45s", 45), ("3600", 3600), ("2w", 1209600)],
)
def test_durations_parse_to_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_bad_duration_names_the_expected_form() -> None:
    with pytest.raises(UsageError, match="expected a duration like 30d"):
        parse_duration("soon")


def test_key_from_takes_x_api_key_then_bearer_then_the_query() -> None:
    assert key_from({"x-api-key": "h", "authorization": "Bearer b"}, {"api-key": "q"}) == "h"
    assert key_from({"authorization": "Bearer b"}, {"api-key": "q"}) == "b"
    assert key_from({"authorization": "Basic b"}, {"api-key": "q"}) == "q"
    assert key_from({"authorization": "Bearer "}, {"api-key": "q"}) == "q"
    assert key_from({}, {"api-key": "q"}) == "q"
    assert key_from({}, {}) is None


# -- keys never reach a log line ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"api-key=SECRET", "?api-key=[redacted]"),
        (b"api%2Dkey=SECRET", "?api-key=[redacted]"),
        (b"api%2dkey=SECRET&format=md", "?api-key=[redacted]&format=md"),
        (b"API-KEY=SECRET", "?API-KEY=[redacted]"),
        (b"%61pi-key=SECRET", "?api-key=[redacted]"),
        (b"api-key=SECRET&api-key=SECRET", "?api-key=[redacted]&api-key=[redacted]"),
        (b"q=disk+usage", "?q=disk+usage"),
        (b"", ""),
    ],
)
def test_redact_query_hides_the_api_key_however_it_is_encoded(raw: bytes, shown: str) -> None:
    assert redact_query(raw) == shown


def test_no_log_record_ever_contains_an_api_key(make: Callable[..., Server], caplog: pytest.LogCaptureFixture) -> None:
    server = make()
    key = server.key("alice", ["ops"])
    admin = server.key("root", ["admin"])
    revoked, record = server.parts.access.create_key("carol", [])
    server.parts.access.revoke(record.prefix)
    secrets = [key, admin, revoked]
    client = server.client
    with caplog.at_level(logging.DEBUG, logger="toolrun"):
        client.get(f"/whoami?api-key={key}")
        client.get(f"/whoami?api%2Dkey={key}")
        client.get(f"/whoami?api%2dkey={key}&format=json")
        client.get("/whoami", headers={"X-API-Key": key})
        client.get("/whoami", headers={"Authorization": f"Bearer {key}"})
        client.get(f"/users?keys=true&api-key={admin}")
        client.get(f"/whoami?api-key={revoked}")
        client.get(f"/tools?api-key={key}&format=md")
        client.get(f"/search?q=echo&api-key={key}")
        client.post(f"/tools/pub.echo?api-key={key}", json={"msg": "hi"})
        client.post(f"/tools/pub.boom?api-key={key}", json={})
        client.post(f"/tools/ops.restart?api-key={key}", json={"service": "x"})
        client.post(f"/tools/no.such?api-key={key}", json={})
        client.post(f"/tools/pub.echo?api-key={key}", content=b"{", headers=JSON)
        client.post(f"/tools/pub.echo?api-key={key}", content=b"{}", headers={"content-type": "text/plain"})
        client.post(f"/tools/pub.echo?api-key={key}", json={"msg": "x"}, headers={"Origin": "http://evil.example"})
        client.get(f"/healthz?api-key={key}", headers={"host": "evil.example"})
        client.get(f"/readyz?api-key={key}")
        client.get(f"/metrics?api-key={key}")
    records = [r for r in caplog.records if r.name.startswith("toolrun")]
    access = [r for r in records if r.name == "toolrun.access"]
    assert len(access) >= 19, "every request is access-logged"
    assert any("api-key=[redacted]" in r.getMessage() for r in access)
    for r in records:
        text = " ".join([r.getMessage(), repr(r.args), r.exc_text or "", str(r.msg)])
        for secret in secrets:
            assert secret not in text, f"{r.name}: {text}"
            assert secret.split("_", 2)[2] not in text
