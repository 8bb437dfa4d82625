"""Jobs at scale (docs/jobs.md, "Limits"): counts, pages and the sweep read the store's indexes, never every
record; SQLite work runs off the event loop; the state file shrinks after retention; what one record and one
caller may hold is capped (parameters, output, live jobs, async jobs running, event streams).

The store tests run on each engine where its code differs (memory, the SQLite state file, a real Redis); the
rest drive a real `toolrun serve`.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.jobs import JobUsers
from support.servers import Processes, RedisServer, ToolrunServer, toolrun_cli, wait_until
from toolrun.settings import Settings
from toolrun.state import JobStore, SharedState

ENGINES = ["memory", "sqlite", "redis"]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = require_binary("redis-server")
    with RedisServer(tmp_path_factory.mktemp("redis"), binary) as server:
        server.start()
        yield server.url


def open_store(engine: str, home: Path, request: pytest.FixtureRequest) -> tuple[SharedState, JobStore]:
    environ = {"TOOLRUN_HOME": str(home)}
    if engine == "redis":
        environ["SVC_REDIS_URL"] = request.getfixturevalue("redis_url")
        # A fresh Redis for each test: the sorted sets are deployment-wide.
        SharedState(Settings.load(environ=environ)).redis().sync().flushdb()
    state = SharedState(Settings.load(environ=environ))
    if engine == "memory":
        from toolrun.state.memory import MemoryJobStore

        return state, MemoryJobStore()
    return state, state.jobs()


def run(engine: str, state: SharedState, scenario: Any) -> None:
    async def go() -> None:
        try:
            await scenario()
        finally:
            if engine == "redis":
                await state.redis().aio().aclose()

    asyncio.run(go())


def record(n: int, user: str, state: str = "awaiting_approval", **extra: Any) -> dict[str, Any]:
    moment = 1000.0 + n
    return {
        "id": f"job{n:05d}",
        "tool": "ops.wipe",
        "state": state,
        "requester": {"username": user, "person": f"user:{user}"},
        "approvers": ["oncall"],
        "created": moment,
        "expires_at": moment + 3600 if state == "awaiting_approval" else None,
        "heartbeat": None,
        "finished": None,
        **extra,
    }


class Viewer:
    def __init__(self, username: str, *groups: str) -> None:
        self.person = f"user:{username}"  # the index keys a requester on its person (models.Identity.person)
        self.groups = frozenset(groups)


@pytest.mark.parametrize("engine", ENGINES)
def test_pages_counts_and_shares_come_from_the_index(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    state, store = open_store(engine, tmp_path, request)

    async def scenario() -> None:
        for n in range(25):
            await store.create(
                record(n, "alice" if n % 2 else "carol", "running" if n % 5 == 0 else "awaiting_approval")
            )
        # Newest first, in pages that follow one another with no gap and no repeat.
        seen: list[str] = []
        cursor = None
        while page := await store.page(state=None, viewer=None, before=cursor, limit=10):
            seen += [job["id"] for _v, job in page]
            cursor = (page[-1][1]["created"], page[-1][1]["id"])
        assert seen == [f"job{n:05d}" for n in reversed(range(25))]
        # A viewer gets its own calls and those it approves; the state filter holds.
        mine = await store.page(state=None, viewer=Viewer("alice"), before=None, limit=100)
        assert {job["requester"]["username"] for _v, job in mine} == {"alice"} and len(mine) == 12
        assert len(await store.page(state=None, viewer=Viewer("bob", "oncall"), before=None, limit=100)) == 25
        paged: list[str] = []
        cursor = None
        while page := await store.page(state=None, viewer=Viewer("carol", "oncall"), before=cursor, limit=7):
            paged += [job["id"] for _v, job in page]
            cursor = (page[-1][1]["created"], page[-1][1]["id"])
        assert paged == seen
        running = await store.page(state="running", viewer=None, before=None, limit=100)
        assert [job["id"] for _v, job in running] == [f"job{n:05d}" for n in (20, 15, 10, 5, 0)]
        counts = await store.counts()
        assert (counts.get("running"), counts.get("awaiting_approval")) == (5, 20)
        # A change of state moves the job between the counts and the caller's share.
        version, job = await store.get("job00001") or (0, {})
        assert await store.live("user:alice") == {"awaiting_approval": 10, "running": 2}
        assert await store.swap("job00001", version, {**job, "state": "cancelled", "finished": 2000.0}, 60)
        assert await store.live("user:alice") == {"awaiting_approval": 9, "running": 2}
        assert (await store.counts()).get("cancelled") == 1
        assert await store.live("user:carol") == {"awaiting_approval": 10, "running": 3}

    run(engine, state, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_sweep_reads_only_what_is_due_and_drops_what_retention_ended(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    state, store = open_store(engine, tmp_path, request)
    now = time.time()

    async def scenario() -> None:
        await store.create(record(1, "alice", expires_at=now - 1))  # its deadline passed
        await store.create(record(2, "alice", expires_at=now + 600))  # not yet
        await store.create(record(3, "alice", "running", heartbeat=now - 30))  # its runner is late
        await store.create(record(4, "alice", "running", heartbeat=now))  # beating
        await store.create(record(5, "alice", "succeeded", finished=now - 100))  # retention over
        await store.create(record(6, "alice", "succeeded", finished=now))
        # a waiting requester's hold lapsed (it left) before the approval deadline: due too (docs/jobs.md)
        await store.create(record(7, "alice", expires_at=now + 600, hold_until=now - 1))
        await store.create(record(8, "alice", expires_at=now + 600, hold_until=now + 10))  # still held
        due = await store.due(now, now - 2)
        assert sorted(job["id"] for _v, job in due) == ["job00001", "job00003", "job00007"]
        assert await store.purge(now - 50) == 1
        assert await store.get("job00005") is None and await store.get("job00006") is not None
        assert (await store.counts()).get("succeeded") == 1
        ids = [job["id"] for _v, job in await store.page(state=None, viewer=None, before=None, limit=10)]
        assert "job00005" not in ids and len(ids) == 7

    run(engine, state, scenario)


def corrupt(engine: str, state: SharedState, job_id: str) -> None:
    """Break one record where it is kept, as a reader that parses every record would trip on it."""
    if engine == "sqlite":
        with sqlite3.connect(state.file().path) as conn:
            conn.execute("UPDATE jobs SET data = '{not json' WHERE id = ?", (job_id,))
    else:
        state.redis().sync().hset(f"toolrun:job:{job_id}", "data", "{not json")


@pytest.mark.parametrize("engine", ["sqlite", "redis"])
def test_counts_and_pages_never_parse_records_they_do_not_return(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Today's `/metrics` and sweep parse every record: one bad record (or 20,000 good ones) is paid by every
    request. Counting and paging read the index; only the page's records are parsed."""
    state, store = open_store(engine, tmp_path, request)

    async def scenario() -> None:
        for n in range(30):
            await store.create(record(n, "alice", expires_at=time.time() + 600))
        corrupt(engine, state, "job00000")  # the oldest: on no first page
        assert (await store.counts()).get("awaiting_approval") == 30
        page = await store.page(state=None, viewer=None, before=None, limit=10)
        assert page[0][1]["id"] == "job00029"
        # A caller who sees none of them reads none of them (today's list parsed them all to find out).
        assert await store.page(state=None, viewer=Viewer("nobody", "ops"), before=None, limit=10) == []
        mine = await store.page(state=None, viewer=Viewer("alice"), before=None, limit=5)
        assert [job["id"] for _v, job in mine] == [f"job{n:05d}" for n in range(29, 24, -1)]
        assert await store.live("user:alice") == {"awaiting_approval": 30, "running": 0}
        assert await store.due(time.time(), time.time() - 2) == []

    run(engine, state, scenario)


def test_sqlite_work_runs_off_the_event_loop(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Another process holds the state file's write lock for a second: a job write waits for it in a thread,
    and the event loop goes on answering meanwhile (today it stood still for the whole second)."""
    state, store = open_store("sqlite", tmp_path, request)
    path = state.file().path
    gaps: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()

    async def scenario() -> None:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        stop = asyncio.Event()
        ticking = asyncio.create_task(ticker(stop))
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        loop.call_later(1.0, lambda: holder.execute("COMMIT"))
        started = time.monotonic()
        await store.create(record(1, "alice"))
        waited = time.monotonic() - started
        stop.set()
        await ticking
        holder.close()
        assert waited >= 0.9  # it did wait for the lock
        assert max(gaps) < 0.5, f"the event loop stood still for {max(gaps):.2f}s"

    asyncio.run(scenario())


def test_the_state_file_shrinks_after_retention_drops_jobs(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    state, store = open_store("sqlite", tmp_path, request)
    path = state.file().path
    now = time.time()

    def size() -> int:
        return sum(p.stat().st_size for p in path.parent.glob("state.db*"))

    async def scenario() -> None:
        for n in range(200):
            big = record(n, "alice", "succeeded", finished=now - 1000, result={"json": {"stdout": "x" * 40_000}})
            await store.create(big)
        await store.create(record(999, "alice"))
        full = size()
        assert full > 8_000_000
        assert await store.purge(now - 500) == 200
        assert size() < full / 4, (full, size())
        assert await store.get("job00999") is not None

    asyncio.run(scenario())


def test_a_state_file_of_an_older_version_gets_its_indexes(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A state.db written before the indexed columns: its jobs are counted and paged after the upgrade."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    with sqlite3.connect(data / "state.db") as conn:
        conn.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, v INTEGER NOT NULL, created REAL NOT NULL, data TEXT)")
        for n in range(3):
            job = record(n, "alice", "running" if n == 2 else "awaiting_approval")
            conn.execute("INSERT INTO jobs VALUES (?, 1, ?, ?)", (job["id"], job["created"], json.dumps(job)))
    (data / "state.db").chmod(0o600)
    _state, store = open_store("sqlite", tmp_path, request)

    async def scenario() -> None:
        assert (await store.counts()) == {"awaiting_approval": 2, "running": 1}
        assert await store.live("user:alice") == {"awaiting_approval": 2, "running": 1}
        page = await store.page(state="running", viewer=Viewer("alice"), before=None, limit=5)
        assert [job["id"] for _v, job in page] == ["job00002"]

    asyncio.run(scenario())


def test_redis_records_of_an_older_version_get_their_indexes(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    state, store = open_store("redis", tmp_path, request)
    sync = state.redis().sync()
    for n in range(3):  # written as the engine did before the sorted sets: a hash and toolrun:jobs
        job = record(n, "alice", "running" if n == 2 else "awaiting_approval")
        sync.hset(f"toolrun:job:{job['id']}", mapping={"v": "1", "data": json.dumps(job)})
        sync.zadd("toolrun:jobs", {job["id"]: job["created"]})

    async def scenario() -> None:
        assert (await store.counts()) == {"awaiting_approval": 2, "running": 1}
        assert await store.live("user:alice") == {"awaiting_approval": 2, "running": 1}

    run("redis", state, scenario)
    sync.close()


# -- a real server ---------------------------------------------------------------------------------

MARK = f"scalemark{uuid.uuid4().hex[:8]}"
CATALOG = f"""\
group: ops
tools:
  - name: wipe
    description: Wipe a target.
    exec: echo wiped {{{{ target | quote }}}}
    params:
      - {{name: target, type: str}}
    approval: required
    approvers: [oncall]
  - name: slow
    exec: "sleep 30 # {MARK}"
    async: true
  - name: big
    exec: "head -c 1048576 /dev/zero | tr '\\\\0' a"
    async: true
"""
USERS = {"alice": ["ops"], "bob": ["oncall"], "root": ["admin"]}


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[ToolrunServer, JobUsers]]:
    settings: dict[str, Any] = getattr(request, "param", {})
    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog, settings))
        users = procs.enter_context(JobUsers(srv, USERS))
        srv.start()
        yield srv, users


@pytest.mark.parametrize("server", [{"SVC_JOB_MAX_LIVE_PER_CALLER": 500}], indirect=True)
def test_get_jobs_is_paged_and_the_cli_follows_the_pages(server: tuple[ToolrunServer, JobUsers]) -> None:
    srv, u = server
    made = [u.req("alice", "POST", "/tools/ops.wipe", {"target": f"t{n}"}).json()["job"] for n in range(105)]
    newest_first = list(reversed(made))
    # The default page is 100 jobs; the next page is named in X-Next-Cursor and Link.
    first = u.req("bob", "GET", "/jobs")
    assert [v["job"] for v in first.json()] == newest_first[:100]
    cursor = first.headers["x-next-cursor"]
    assert first.headers["link"].endswith('rel="next"') and cursor in first.headers["link"]
    rest = u.req("bob", "GET", f"/jobs?cursor={cursor}")
    assert [v["job"] for v in rest.json()] == newest_first[100:] and "x-next-cursor" not in rest.headers
    small = u.req("alice", "GET", "/jobs?limit=3&status=awaiting_approval")
    assert [v["job"] for v in small.json()] == newest_first[:3]
    # Bad values are the caller's 400, naming the parameter.
    for query, name in (("limit=0", "limit"), ("limit=1001", "limit"), ("limit=x", "limit"), ("cursor=!!", "cursor")):
        r = u.req("bob", "GET", f"/jobs?{query}")
        assert r.status_code == 400 and name in r.json()["error"], (query, r.text)
    # The CLI follows every page, or takes --limit.
    cli = ["--url", srv.url, "--api-key", u.keys["bob"]]
    listed = toolrun_cli(*cli, "jobs", "list", "--json", env=srv.env)
    assert listed.returncode == 0, listed.stderr
    assert [v["job"] for v in json.loads(listed.stdout)] == newest_first
    two = toolrun_cli(*cli, "jobs", "list", "--limit", "2", "--json", env=srv.env)
    assert [v["job"] for v in json.loads(two.stdout)] == newest_first[:2]
    # The local CLI (the state file) pages the same way.
    local = toolrun_cli("jobs", "list", "--limit", "4", "--json", "--catalog", str(srv.catalog), env=srv.env)
    assert [v["job"] for v in json.loads(local.stdout)] == newest_first[:4]


@pytest.mark.parametrize("server", [{"SVC_JOB_MAX_LIVE_PER_CALLER": 3, "SVC_MAX_CONCURRENT_CALLS": 2}], indirect=True)
def test_one_caller_holds_at_most_its_share_of_jobs(server: tuple[ToolrunServer, JobUsers]) -> None:
    _srv, u = server
    first = u.req("alice", "POST", "/tools/ops.wipe", {"target": "a"}).json()["job"]
    # Async jobs running: at most half the pool (1 of 2), so a client that fires them and goes away cannot hold
    # every slot.
    slow = u.req("alice", "POST", "/tools/ops.slow")
    assert slow.status_code == 202, slow.text
    r = u.req("alice", "POST", "/tools/ops.slow")
    assert r.status_code == 429 and "async jobs running (at most 1 per caller" in r.text, r.text
    assert r.headers["retry-after"]
    u.cancel("alice", slow.json()["job"])
    u.until("alice", slow.json()["job"], "cancelled")
    for target in ("b", "c"):
        assert u.req("alice", "POST", "/tools/ops.wipe", {"target": target}).status_code == 202
    # Three jobs live: the fourth waits for one of them to end.
    r = u.req("alice", "POST", "/tools/ops.wipe", {"target": "d"})
    assert r.status_code == 429, r.text
    assert "holds 3 jobs awaiting approval or running (at most 3 per caller)" in r.text
    assert r.headers["retry-after"]
    assert u.req("root", "POST", "/tools/ops.wipe", {"target": "d"}).status_code == 202  # another caller's share
    assert u.cancel("alice", first).status_code == 200
    assert u.req("alice", "POST", "/tools/ops.wipe", {"target": "d"}).status_code == 202


def test_a_job_record_holds_its_output_once_and_cut_at_the_cap(
    server: tuple[ToolrunServer, JobUsers], tmp_path: Path
) -> None:
    srv, u = server
    # Parameters: at most 64 KiB as JSON.
    r = u.req("alice", "POST", "/tools/ops.wipe", {"target": "x" * 70_000})
    assert r.status_code == 413 and "parameters of a call that becomes a job" in r.text and "65536" in r.text
    # 1 MiB of output: the record keeps 128 KiB of it, once, with a marker where it was cut.
    job = u.req("alice", "POST", "/tools/ops.big").json()["job"]
    view = u.until("alice", job, "succeeded", timeout=30)
    body = view["result"]["body"]
    assert body.startswith("a" * 1000) and body.rstrip().endswith("bytes of each output]")
    assert "917504 more bytes cut" in body
    with sqlite3.connect(srv.env["TOOLRUN_HOME"] + "/data/state.db") as conn:
        (stored,) = conn.execute("SELECT length(data) FROM jobs WHERE id = ?", (job,)).fetchone()
    assert 128 * 1024 < stored < 140 * 1024
    as_json = u.req("alice", "POST", "/tools/ops.big", Accept="application/json").json()["job"]
    payload = json.loads(u.until("alice", as_json, "succeeded", timeout=30)["result"]["body"])
    assert payload["truncated"] is True and payload["result"] == payload["stdout"]


@pytest.mark.parametrize("server", [{"SVC_JOB_MAX_STREAMS_PER_CALLER": 2, "SVC_WORKERS": 1}], indirect=True)
def test_event_streams_are_capped_per_caller(server: tuple[ToolrunServer, JobUsers]) -> None:
    """The share is per server process, as for MCP streams (one worker here, so every stream meets it)."""
    srv, u = server
    job = u.req("alice", "POST", "/tools/ops.wipe", {"target": "a"}).json()["job"]
    url = f"{srv.url}/jobs/{job}/events"
    with httpx.Client(timeout=10) as client:
        alice = {"X-API-Key": u.keys["alice"]}
        first = client.send(client.build_request("GET", url, headers=alice), stream=True)
        second = client.send(client.build_request("GET", url, headers=alice), stream=True)
        assert first.status_code == second.status_code == 200
        third = client.get(url, headers=alice)
        assert third.status_code == 429 and "at most 2 per caller" in third.json()["error"]
        assert third.headers["retry-after"]
        bob = client.send(client.build_request("GET", url, headers={"X-API-Key": u.keys["bob"]}), stream=True)
        assert bob.status_code == 200  # another caller's share
        bob.close()
        first.close()  # a stream that ends gives its place back

        def opens() -> bool:
            probe = client.send(client.build_request("GET", url, headers=alice), stream=True)
            probe.close()
            return probe.status_code == 200

        wait_until(opens, 10, "a freed place", interval=0.2)
        second.close()


@pytest.mark.parametrize("server", [{"SVC_JOB_MAX_LIVE_PER_CALLER": 1}], indirect=True)
def test_the_share_of_jobs_is_said_over_mcp_too(server: tuple[ToolrunServer, JobUsers]) -> None:
    """The MCP door makes jobs through the same rule; its error says which share is full, not "rate limited"."""
    import anyio

    from support.mcp import mcp_http, text_of

    srv, u = server
    assert u.req("alice", "POST", "/tools/ops.wipe", {"target": "a"}).status_code == 202

    async def main() -> Any:
        async with mcp_http(srv.url + "/mcp", "legacy", {"X-API-Key": u.keys["alice"]}) as client:
            return await client.call_tool("execute", {"key": "ops.wipe", "arguments": {"target": "b"}})

    result = anyio.run(main)
    assert result.is_error and "at most 1 per caller" in text_of(result), text_of(result)
    assert result.structured_content["error"] == "CallerFull"
