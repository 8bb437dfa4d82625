"""Scale-out on Redis: a real redis-server and three real `toolrun serve` replicas sharing it.

Replicas A and B fail closed (the default), replica C has `rate_limit.fail_open=true`; all three
limit calls per (user, tool) to CALLS per 60 s window. Keys are minted once with the real CLI
(`toolrun keys create` with the same SVC_REDIS_URL). The fault test runs last: it freezes Redis
(a hang), stops it (a clean restart with its data) and checks that everything recovers.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.http import JSON
from support.keys import create_key, mint_redis_key
from support.servers import Processes, RedisServer, ToolrunServer, clean_env, start_all, toolrun_cli

# One client per thread: a new httpx client per request costs more (SSL context) than the request.
_LOCAL = threading.local()
_CLIENTS: list[httpx.Client] = []


def http() -> httpx.Client:
    client: httpx.Client | None = getattr(_LOCAL, "client", None)
    if client is None:
        client = _LOCAL.client = httpx.Client(timeout=10, limits=httpx.Limits(max_keepalive_connections=0))
        _CLIENTS.append(client)
    return client


CALLS = 5
WINDOW = 60
READYZ_BUDGET = 2.0  # readiness_timeout is 1 s per check; the checks run side by side

CATALOG = """\
version: 1
group: pub
tools:
  - name: echo
    public: true
    description: Print a message back.
    exec: printf '%s' {{ msg | quote }}
    params:
      - name: msg
        type: str
        required: false
        default: hi
  - name: fault
    public: true
    description: The tool the fault test calls while Redis is out.
    exec: printf ok
  - name: after1
    public: true
    description: The tool the fault test calls once Redis is back (first time).
    exec: printf ok
  - name: after2
    public: true
    description: The tool the fault test calls once Redis is back (second time).
    exec: printf ok
  - name: remember
    public: true
    description: Returns the session value it saw, then stores a new one.
    fn: scale_fns:remember
"""

FNS = """\
from toolrun.context import get_session, session_available, set_session


def remember(value: str) -> str:
    seen = get_session("value", "unset")
    set_session("value", value)
    return f"{seen}|{session_available()}"
"""


@dataclass
class Cluster:
    redis: RedisServer
    a: ToolrunServer
    b: ToolrunServer
    open_: ToolrunServer  # fail_open=true
    env: dict[str, str]  # what `toolrun keys` needs to reach the same Redis

    @property
    def replicas(self) -> list[ToolrunServer]:
        return [self.a, self.b, self.open_]

    def key(self, username: str, *groups: str) -> str:
        """A key minted in-process, straight into Redis (the CLI tests use `toolrun keys create`)."""
        return mint_redis_key(self.redis.url, username, *groups)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    binary = require_binary("redis-server")
    base = tmp_path_factory.mktemp("scale")
    (base / "catalog").mkdir()
    catalog = write_catalog(base / "catalog", CATALOG)
    (base / "catalog" / "scale_fns.py").write_text(FNS, encoding="utf-8")
    with Processes() as procs:
        redis = procs.add(RedisServer(base / "redis", binary).start())
        shared = {
            "SVC_REDIS_URL": redis.url,
            "SVC_RATE_LIMIT_ENABLED": True,
            "SVC_RATE_LIMIT_CALLS": CALLS,
            "SVC_RATE_LIMIT_WINDOW": WINDOW,
            "SVC_LOG_LEVEL": "warning",
        }
        a = procs.add(ToolrunServer(base / "a", catalog, shared))
        b = procs.add(ToolrunServer(base / "b", catalog, shared))
        c = procs.add(ToolrunServer(base / "c", catalog, {**shared, "SVC_RATE_LIMIT_FAIL_OPEN": True}))
        start_all(a, b, c)
        procs.callback(lambda: [client.close() for client in _CLIENTS])
        yield Cluster(redis, a, b, c, clean_env(base / "cli-home", {"SVC_REDIS_URL": redis.url}))


def whoami(server: ToolrunServer, key: str) -> httpx.Response:
    return http().get(server.url + "/whoami", headers={"X-API-Key": key}, timeout=5)


def call(server: ToolrunServer, tool: str, key: str | None = None, body: object = None) -> httpx.Response:
    headers = {**JSON, **({"X-API-Key": key} if key else {})}
    return http().post(f"{server.url}/tools/{tool}", content=json.dumps(body or {}), headers=headers, timeout=10)


# -- shared state ---------------------------------------------------------------------------------


def test_every_replica_is_ready_with_redis_up(cluster: Cluster) -> None:
    for server in cluster.replicas:
        response = http().get(server.url + "/readyz", timeout=5)
        assert (response.status_code, response.json()) == (200, {"status": "ok"}), server.log()


def test_a_key_created_once_with_the_cli_works_on_every_replica(cluster: Cluster) -> None:
    key = create_key(cluster.env, "alice", "ops")
    for server in cluster.replicas:
        response = whoami(server, key)
        assert response.status_code == 200, response.text
        assert response.json()["username"] == "alice"
        assert response.json()["groups"] == ["ops"]
    # ...and nothing was written to a replica's own SQLite store
    for server in cluster.replicas:
        assert not (server.home / "data" / "toolrun.db").exists()


def test_revoking_a_key_takes_effect_on_every_replica_at_once(cluster: Cluster) -> None:
    key = create_key(cluster.env, "bob")
    assert [whoami(s, key).status_code for s in cluster.replicas] == [200, 200, 200]
    done = toolrun_cli("keys", "revoke", key.split("_")[1], env=cluster.env)
    assert done.returncode == 0, done.stderr
    responses = [whoami(s, key) for s in cluster.replicas]
    assert [r.status_code for r in responses] == [401, 401, 401]
    assert all(r.json() == {"error": "unauthorized"} for r in responses)


def test_n_calls_spread_over_the_replicas_allow_exactly_the_limit(cluster: Cluster) -> None:
    """CALLS per (user, tool) per window, counted once across all replicas (atomic in Redis)."""
    total = 4 * CALLS + 1

    async def burst(key: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_connections=total)) as client:
            servers = [cluster.a, cluster.b, cluster.open_]
            return await asyncio.gather(
                *(
                    client.post(
                        f"{servers[i % 3].url}/tools/pub.echo",
                        content=b'{"msg": "x"}',
                        headers={**JSON, "X-API-Key": key},
                    )
                    for i in range(total)
                )
            )

    for attempt in range(3):
        key = cluster.key(f"limited{attempt}")
        started = time.time()
        responses = asyncio.run(burst(key))
        if int(started // WINDOW) == int(time.time() // WINDOW):
            break  # the burst stayed inside one clock-aligned window
    else:  # pragma: no cover - three bursts each straddling a minute boundary
        pytest.fail("every burst straddled a window boundary")
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * CALLS + [429] * (total - CALLS), [(r.status_code, r.text) for r in responses]
    for r in responses:
        if r.status_code == 429:
            retry = int(r.headers["retry-after"])
            assert 1 <= retry <= WINDOW
            assert r.headers["content-type"].startswith("text/plain")
            assert (
                r.text.startswith("RateLimited: ")
                and f"retry after {retry} second{'s' if retry != 1 else ''}" in r.text
            )
        else:
            assert r.text == "x"
    # another user's bucket is untouched
    assert call(cluster.b, "pub.echo", cluster.key("unlimited")).status_code == 200


def test_session_values_set_through_one_replica_are_read_through_another(cluster: Cluster) -> None:
    """The real path: the MCP SDK client over streamable HTTP, `execute` with `session`."""
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    key = cluster.key("carol")

    async def execute(server: ToolrunServer, value: str, session: str, api_key: str = key) -> str:
        async with (
            httpx2.AsyncClient(headers={"X-API-Key": api_key}, timeout=10) as http,
            Client(streamable_http_client(server.url + "/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool(
                "execute", {"key": "pub.remember", "arguments": {"value": value}, "session": session}
            )
        assert not result.is_error, result
        return str(result.structured_content["result"])  # type: ignore[index]

    async def scenario() -> list[str]:
        return [
            await execute(cluster.a, "one", "s1"),
            await execute(cluster.b, "two", "s1"),
            await execute(cluster.open_, "three", "s1"),
            await execute(cluster.a, "other", "s2"),  # another session of the same user
            await execute(cluster.b, "dave's", "s1", cluster.key("dave")),  # another user, same name
        ]

    assert asyncio.run(scenario()) == ["unset|True", "one|True", "two|True", "unset|True", "unset|True"]


# -- faults (last: they stop Redis) ----------------------------------------------------------------


def _timed(request: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    response = request()
    return response, time.perf_counter() - started


def _assert_outage(cluster: Cluster, key: str) -> dict[str, float]:
    """What every door answers while Redis does not: degraded, 503s, no hang, no traceback.

    The replicas are probed side by side; returns the worst latency of each kind of request."""
    with ThreadPoolExecutor(len(cluster.replicas)) as pool:
        results = list(pool.map(lambda s: _outage_of(cluster, s, key), cluster.replicas))
    return {name: max(r[name] for r in results) for name in results[0]}


def _outage_of(cluster: Cluster, server: ToolrunServer, key: str) -> dict[str, float]:
    took: dict[str, float] = {}
    ready, took["readyz"] = _timed(lambda: http().get(server.url + "/readyz", timeout=10))
    assert (ready.status_code, ready.json()) == (503, {"status": "degraded"})
    assert took["readyz"] < READYZ_BUDGET, f"/readyz took {took['readyz']:.2f}s"

    health, took["healthz"] = _timed(lambda: http().get(server.url + "/healthz", timeout=10))
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert took["healthz"] < 0.5

    # A keyed call needs Redis to resolve the key, whatever the limiter setting: 503, plain text.
    keyed, took["keyed POST"] = _timed(lambda: call(server, "pub.fault", key))
    assert keyed.status_code == 503, keyed.text
    assert keyed.headers["retry-after"] == "1"
    assert keyed.headers["content-type"].startswith("text/plain")
    assert keyed.text.startswith("BackendUnavailable: shared state (Redis) unavailable: "), keyed.text
    assert "\n" not in keyed.text.strip() and "Traceback" not in keyed.text and "redis://" not in keyed.text
    assert took["keyed POST"] < 3.0, f"a keyed call took {took['keyed POST']:.2f}s"

    # JSON routes answer 503 with a JSON error.
    listing = http().get(server.url + "/tools", headers={"X-API-Key": key}, timeout=10)
    assert listing.status_code == 503, listing.text
    assert listing.json()["error"].startswith("shared state (Redis) unavailable")

    # An anonymous call needs only the limiter: fail closed -> 503, fail open -> the call runs.
    anonymous, took["anonymous POST"] = _timed(lambda: call(server, "pub.fault"))
    assert took["anonymous POST"] < 3.0
    if server is cluster.open_:
        assert (anonymous.status_code, anonymous.text) == (200, "ok")
    else:
        assert anonymous.status_code == 503, anonymous.text
        assert anonymous.text.startswith("BackendUnavailable: ")
    return took


def _assert_recovered(cluster: Cluster, key: str, username: str, tool: str) -> None:
    """Ready again, and calls work again at once (a stale pooled connection is retried).

    Each phase calls its own `tool`, so the two phases' calls do not add up to the rate limit."""
    for server in cluster.replicas:
        ready = http().get(server.url + "/readyz", timeout=10)
        assert (ready.status_code, ready.json()) == (200, {"status": "ok"})
        assert whoami(server, key).json()["username"] == username
        keyed, anonymous = call(server, tool, key), call(server, tool)
        assert (keyed.status_code, keyed.text, anonymous.status_code, anonymous.text) == (200, "ok", 200, "ok")


def test_redis_frozen_then_stopped_degrades_promptly_and_everything_recovers(
    cluster: Cluster, record_property: pytest.RecordProperty
) -> None:
    key, other = cluster.key("erin"), cluster.key("frank")
    assert [whoami(s, key).status_code for s in cluster.replicas] == [200, 200, 200]

    # 1. Redis hangs (SIGSTOP): every request waits at most the short client timeouts.
    cluster.redis.freeze()
    try:
        frozen = _assert_outage(cluster, key)
    finally:
        cluster.redis.thaw()
    _assert_recovered(cluster, key, "erin", "pub.after1")
    # A call the frozen Redis never answered is counted at most once (a timeout is never retried).
    import redis

    with redis.Redis.from_url(cluster.redis.url) as r:
        counted = sum(int(r.get(name) or 0) for name in r.scan_iter("toolrun:rl:anon:*:pub.fault:*"))
    assert counted <= len(cluster.replicas), f"{counted} counts for {len(cluster.replicas)} anonymous calls"
    # Replies that were pending when a client gave up must never answer a later request.
    for _ in range(10):
        for server in cluster.replicas:
            assert whoami(server, other).json()["username"] == "frank"
            assert whoami(server, key).json()["username"] == "erin"

    # 2. Redis stops (a clean shutdown that keeps its data), then restarts on the same port.
    cluster.redis.stop(save=True)
    assert not cluster.redis.alive()
    stopped = _assert_outage(cluster, key)
    cluster.redis.start()
    _assert_recovered(cluster, key, "erin", "pub.after2")

    for name, figures in (("frozen", frozen), ("stopped", stopped)):
        record_property(f"redis_{name}_latency", json.dumps({k: round(v, 3) for k, v in figures.items()}))
        print(f"\nRedis {name}: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in figures.items()))
    # Each replica logged which check failed (server-side only), and nothing crashed.
    logs = [s.log() for s in cluster.replicas]
    assert all("readiness check" in log for log in logs)
    assert not any("Traceback" in log for log in logs), logs


def test_the_cli_reports_a_redis_that_is_not_there_cleanly_without_its_password(tmp_path: Path) -> None:
    """`toolrun keys` against a Redis that does not answer: exit 69, one line, no URL in it."""
    env = clean_env(tmp_path / "home", {"SVC_REDIS_URL": "redis://:s3cret@127.0.0.1:1/0"})
    done = toolrun_cli("keys", "create", "x", env=env)
    assert done.returncode == 69, (done.returncode, done.stderr)
    assert "unavailable" in done.stderr and "s3cret" not in done.stderr
    assert "Traceback" not in done.stderr
