"""MCP clients of both protocol eras behind a real nginx round robin over two replicas sharing a real Redis.

No sticky routing: nginx hands each request to the next replica, so a handshake-era client's
session (its `Mcp-Session-Id`) must be known to both. The tools answer with the pid of the
process that ran them, so the test sees that both replicas served one session.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from support.binaries import require_binary
from support.keys import create_key
from support.mcp import MODERN_VERSION, text_of
from support.servers import Nginx, Processes, RedisServer, ToolrunServer, start_all

CATALOG = """\
version: 1
group: r
tools:
  - name: remember
    public: true
    description: Returns the session value it saw and its process id, then stores a new one.
    fn: rfns:remember
    params:
      - name: value
        type: str
"""
FNS = """\
import os
from toolrun.context import get_session, set_session


def remember(value: str) -> str:
    seen = get_session("value", "unset")
    set_session("value", value)
    return f"{seen}|{os.getpid()}"
"""


@dataclass
class Cluster:
    url: str  # nginx's /mcp
    key: str
    other: str
    catalog: Path  # both replicas' catalog file (each polls it every 0.5 s)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_binary("redis-server")
    require_binary("nginx")
    base = tmp_path_factory.mktemp("replicas")
    (base / "rfns.py").write_text(FNS)
    catalog = base / "replicas.yaml"
    catalog.write_text(CATALOG)
    with Processes() as procs:
        redis = procs.add(RedisServer(base / "redis")).start()
        settings = {"SVC_REDIS_URL": redis.url, "SVC_WORKERS": "1", "SVC_RELOAD_INTERVAL": "0.5"}
        replicas = [procs.add(ToolrunServer(base / f"replica{i}", catalog, settings)) for i in (1, 2)]
        start_all(*replicas)
        nginx = procs.add(Nginx(base / "nginx", [r.port for r in replicas])).start()
        key = create_key(replicas[0].env, "olga", "ops")
        other = create_key(replicas[0].env, "bob", "ops")
        yield Cluster(f"http://127.0.0.1:{nginx.port}/mcp", key, other, catalog)


def session_run(url: str, mode: str, headers: dict[str, str], values: list[str]) -> list[str]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> list[str]:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http), mode=mode) as client,
        ):
            out = []
            for value in values:
                arguments: dict[str, Any] = {"key": "r.remember", "arguments": {"value": value}}
                if mode == MODERN_VERSION:
                    arguments["session"] = "named"
                out.append(text_of(await client.call_tool("execute", arguments)))
            return out

    return anyio.run(main)


@pytest.mark.parametrize("mode", ["legacy", MODERN_VERSION])
def test_a_session_works_across_replicas_behind_a_round_robin_proxy(cluster: Cluster, mode: str) -> None:
    values = [f"v{i}" for i in range(6)]
    answers = session_run(cluster.url, mode, {"X-API-Key": cluster.key}, values)
    assert [a.split("|")[0] for a in answers] == ["unset", *values[:-1]]  # each call saw the one before
    assert len({a.split("|")[1] for a in answers}) == 2, "the proxy never switched replicas"


def test_a_handshake_session_is_refused_to_another_user_and_closed_on_every_replica(cluster: Cluster) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    opened = httpx.post(cluster.url, json=init, headers={**base, "X-API-Key": cluster.key})
    sid = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    session = {**base, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
    for _ in range(4):  # both replicas, twice
        assert httpx.post(cluster.url, json=listing, headers={**session, "X-API-Key": cluster.key}).status_code == 200
        assert httpx.post(cluster.url, json=listing, headers={**session, "X-API-Key": cluster.other}).status_code == 404
    assert httpx.delete(cluster.url, headers={"Mcp-Session-Id": sid, "X-API-Key": cluster.key}).status_code == 200
    for _ in range(4):
        gone = httpx.post(cluster.url, json=listing, headers={**session, "X-API-Key": cluster.key})
        assert gone.status_code == 404


def test_a_handshake_client_behind_the_proxy_is_told_of_a_reload_by_the_replica_holding_its_stream(
    cluster: Cluster,
) -> None:
    """The client's GET stream sits on one replica; that replica reloads on its own poll and tells it."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    seen: list[Any] = []
    original = cluster.catalog.read_text()

    async def on_message(message: Any) -> None:
        if "ToolListChanged" in type(message).__name__:
            seen.append(message)

    async def main() -> str:
        async with (
            httpx2.AsyncClient(headers={"X-API-Key": cluster.key}, timeout=60) as http,
            Client(
                streamable_http_client(cluster.url, http_client=http), mode="legacy", message_handler=on_message
            ) as client,
        ):
            await anyio.sleep(0.5)  # the client opens its GET stream after `initialized`
            cluster.catalog.write_text(original + "  - name: added\n    public: true\n    exec: printf added\n")
            with anyio.fail_after(15):
                while not seen:
                    await anyio.sleep(0.05)
                while True:  # the other replica may reload up to one poll later: its next call may miss
                    result = await client.call_tool("execute", {"key": "r.added"})
                    if not result.is_error:
                        return text_of(result)
                    await anyio.sleep(0.1)

    try:
        assert anyio.run(main) == "added"
    finally:
        cluster.catalog.write_text(original)
