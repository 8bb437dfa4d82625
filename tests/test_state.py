"""Shared state: every kind keeps its promise on every engine the settings can pick.

Each test opens the state as two server processes would (`SharedState` twice on the same settings) and
checks what one sees of the other's writes: nothing with the memory engine (one process), everything with
the SQLite state file (`serve --workers N`) and with Redis (replicas). The names a running deployment keeps
its data under (Redis keys, SQLite tables) are pinned too: an upgrade must find them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import stat
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from support.binaries import require_binary
from support.servers import RedisServer
from toolrun.access import Access
from toolrun.settings import Settings
from toolrun.state import SharedState

ENGINES = ["memory", "sqlite", "redis"]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = require_binary("redis-server")
    with RedisServer(tmp_path_factory.mktemp("redis"), binary) as server:
        server.start()
        yield server.url


def open_pair(engine: str, home: Path, request: pytest.FixtureRequest) -> tuple[SharedState, SharedState]:
    """The state of two server processes: two workers of one server (sqlite), two replicas (redis), or one
    process twice (memory: nothing to share)."""
    environ = {"TOOLRUN_HOME": str(home), "SVC_RATE_LIMIT_ENABLED": "true", "SVC_RATE_LIMIT_CALLS": "2"}
    if engine == "redis":
        environ["SVC_REDIS_URL"] = request.getfixturevalue("redis_url")
    settings = Settings.load(environ=environ)
    workers = 2 if engine == "sqlite" else 1
    first, second = SharedState(settings, workers), SharedState(settings, workers)
    assert first.engine == second.engine == engine
    return first, second


def run(engine: str, pair: tuple[SharedState, SharedState], scenario: Callable[[], Awaitable[None]]) -> None:
    async def go() -> None:
        try:
            await scenario()
        finally:
            if engine == "redis":  # this loop's connections end with it
                for state in pair:
                    await state.redis().aio().aclose()

    asyncio.run(go())


@pytest.mark.parametrize("engine", ENGINES)
def test_a_rate_limit_holds_for_every_process_that_shares_the_engine(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pair = open_pair(engine, tmp_path, request)
    first, second = (state.limiter() for state in pair)
    assert first is not None and second is not None
    bucket = f"user:{uuid.uuid4().hex}"

    async def scenario() -> None:
        assert await first.hit(bucket, "ops.hi") is None
        assert await first.hit(bucket, "ops.hi") is None
        assert await first.hit(bucket, "ops.other") is None  # another tool, another bucket
        third = await second.hit(bucket, "ops.hi")
        if engine == "memory":
            assert third is None  # another process's memory: its own count
            assert (await first.peek(bucket, "ops.hi"))[0] == 2
        else:
            assert third is not None and 1 <= third <= 3600  # the seconds left in the window
            assert (await first.peek(bucket, "ops.hi"))[0] == 3  # a refused call counts too
        assert await first.hit(bucket, "ops.hi") is not None

    run(engine, pair, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_session_values_follow_the_client_from_process_to_process(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pair = open_pair(engine, tmp_path, request)
    first, second = (state.sessions() for state in pair)
    sid = f"user:alice\x1f{uuid.uuid4().hex}"

    async def scenario() -> None:
        assert await first.load(sid) == {}
        await first.save(sid, {"count": 1, "name": "ü"})
        assert await first.load(sid) == {"count": 1, "name": "ü"}
        assert await second.load(sid) == ({} if engine == "memory" else {"count": 1, "name": "ü"})
        await second.save(sid, {"count": 2})
        assert await first.load(sid) == ({"count": 1, "name": "ü"} if engine == "memory" else {"count": 2})

    run(engine, pair, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_mcp_session_opened_on_one_process_is_known_and_closed_on_the_other(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pair = open_pair(engine, tmp_path, request)
    first, second = (state.mcp_sessions() for state in pair)
    sid = uuid.uuid4().hex

    async def scenario() -> None:
        assert await first.owner(sid) is None
        await first.open(sid, "user:alice")
        assert await first.owner(sid) == "user:alice"
        if engine == "memory":
            assert await second.owner(sid) is None
            await first.close(sid)
        else:
            assert await second.owner(sid) == "user:alice"
            await second.close(sid)
        assert await first.owner(sid) is None

    run(engine, pair, scenario)


@pytest.mark.parametrize("engine", ["sqlite", "redis"])
def test_a_job_changes_by_compare_and_set_so_two_deciders_cannot_both_win(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pair = open_pair(engine, tmp_path, request)
    first, second = (state.jobs() for state in pair)
    job_id = uuid.uuid4().hex
    record = {"id": job_id, "created": 1.0, "state": "awaiting_approval"}

    async def scenario() -> None:
        await first.create(record)
        assert await second.get(job_id) == (1, record)
        assert await first.swap(job_id, 1, {**record, "state": "running"})
        assert not await second.swap(job_id, 1, {**record, "state": "denied"})  # it read version 1: too late
        assert await second.get(job_id) == (2, {**record, "state": "running"})
        assert (2, {**record, "state": "running"}) in await second.all()
        await second.delete(job_id)
        assert await first.get(job_id) is None

    run(engine, pair, scenario)


def test_jobs_of_one_process_still_go_to_the_state_file(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Jobs outlive a restart and the local `toolrun jobs` sees them: never in memory, even for one worker."""
    first, second = open_pair("memory", tmp_path, request)
    job_id = uuid.uuid4().hex
    asyncio.run(first.jobs().create({"id": job_id, "created": 1.0}))
    assert asyncio.run(second.jobs().get(job_id)) == (1, {"id": job_id, "created": 1.0})


def test_the_state_file_keeps_its_tables_and_mode_across_upgrades(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    first, _ = open_pair("sqlite", tmp_path, request)
    first.jobs()
    path = tmp_path / "data" / "state.db"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with sqlite3.connect(path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert {"buckets", "sessions", "mcp_sessions", "jobs"} <= tables
    keys = first.keys()
    Access(keys).create_key("alice", ["ops"])
    with sqlite3.connect(tmp_path / "data" / "toolrun.db") as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        columns = [row[1] for row in conn.execute("PRAGMA table_info(keys)")]
    assert {"users", "keys"} <= tables
    assert columns == ["prefix", "username", "hash", "created_at", "expires_at", "revoked_at"]


def test_redis_keeps_its_key_names_across_upgrades(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    pair = open_pair("redis", tmp_path, request)
    state = pair[0]
    tag = uuid.uuid4().hex
    key, record = Access(state.keys()).create_key(f"u{tag}", ["ops"])

    async def scenario() -> None:
        limiter = state.limiter()
        assert limiter is not None
        await limiter.hit(f"user:{tag}", "ops.hi")
        await state.sessions().save(f"s{tag}", {"a": 1})
        await state.mcp_sessions().open(f"m{tag}", "user:alice")
        await state.jobs().create({"id": f"j{tag}", "created": 1.0})

    run("redis", pair, scenario)
    names = {name.decode() for name in state.redis().sync().keys(f"toolrun:*{tag}*")}
    assert f"toolrun:user:u{tag}" in names
    assert f"toolrun:mcp:m{tag}" in names
    assert f"toolrun:job:j{tag}" in names
    assert any(n.startswith(f"toolrun:rl:user:{tag}:ops.hi:") for n in names)
    assert state.redis().sync().hget(f"toolrun:key:{record.prefix}", "username") == f"u{tag}".encode()
    assert state.redis().sync().zscore("toolrun:jobs", f"j{tag}") == 1.0
    session = "toolrun:session:" + hashlib.sha256(f"s{tag}".encode()).hexdigest()
    assert json.loads(state.redis().sync().get(session) or b"null") == {"a": 1}
    assert state.keys().resolve(key) is not None
    state.redis().sync().close()


def test_the_concurrency_pool_of_several_workers_is_made_in_shared_memory(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    one, _ = open_pair("memory", tmp_path, request)
    many, _ = open_pair("sqlite", tmp_path, request)
    assert not one.slots().shared
    pool = many.slots()
    assert pool.shared and pool.cap == 256
    assert pool.take()
    pool.give()
