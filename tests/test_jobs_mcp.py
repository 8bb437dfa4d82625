"""Approval over MCP with the SDK's own client, against a real `toolrun serve` (HTTP) and `serve --stdio`.

2026-07-28: the call answers `input_required` (a question: keep waiting or withdraw), the client's
driver asks its elicitation callback and retries, and gets the result once an approver decided.
Handshake era: an `elicitation/create` request where the client declared elicitation and there is a
channel back (stdio); elsewhere (stateless HTTP) an error result naming the job and how to follow it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from support.catalogs import write_catalog
from support.jobs import JobUsers, approval_catalog
from support.mcp import mcp_http, mcp_stdio, text_of
from support.servers import Processes, ToolrunServer, toolrun_cli

CATALOG = approval_catalog()


class World:
    """alice (ops) calls ops.wipe, bob (oncall) approves it."""

    def __init__(self, server: ToolrunServer, users: JobUsers) -> None:
        self.server = server
        self.users = users
        self.alice = users.keys["alice"]
        self.bob = users.keys["bob"]

    def pending(self) -> list[dict[str, Any]]:
        return self.users.pending("bob")

    def decide(self, job: str, action: str = "approve") -> None:
        r = self.users.decide("bob", job, action, {})
        assert r.status_code == 200, r.text


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One server for the file, its tests in order on one worker (support/scheduling.py's ONE_WORKER): each one's
    call is its own job, and each test but the last leaves none pending (two check bob's whole list)."""
    tmp_path = tmp_path_factory.mktemp("jobs-mcp")
    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        server = procs.add(ToolrunServer(tmp_path / "srv", catalog))
        w = World(server, procs.enter_context(JobUsers(server, {"alice": ["ops"], "bob": ["oncall"]})))
        server.start()
        yield w


def approving_callback(world: World, asked: list[str], action: str = "accept") -> Any:
    """An elicitation callback that records the question and, as a person would meanwhile, has bob decide."""

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if action == "accept":
            job = params.message.split("(job ", 1)[1].split(")", 1)[0]
            await anyio.to_thread.run_sync(world.decide, job)
        return types.ElicitResult(action=action)  # type: ignore[arg-type]

    return callback


@asynccontextmanager
async def http_client(url: str, mode: str, key: str, callback: Any = None) -> AsyncIterator[Any]:
    """The SDK's streamable-HTTP client, with an elicitation callback when given."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=callback) as client,
    ):
        yield client


def call_wipe(client: Any, target: str) -> Any:
    return client.call_tool("execute", {"key": "ops.wipe", "arguments": {"target": target}})


def test_http_2026_round_trip_waits_for_the_approver(world: World) -> None:
    asked: list[str] = []

    async def main() -> Any:
        callback = approving_callback(world, asked)
        async with http_client(world.server.url + "/mcp", "2026-07-28", world.alice, callback) as client:
            return await call_wipe(client, "m1")

    result = anyio.run(main)
    assert not result.is_error and text_of(result) == "wiped m1\n"
    assert len(asked) == 1 and "needs approval by a member of oncall" in asked[0]


def test_http_2026_decline_withdraws_the_call(world: World) -> None:
    asked: list[str] = []

    async def main() -> Any:
        callback = approving_callback(world, asked, "decline")
        async with http_client(world.server.url + "/mcp", "2026-07-28", world.alice, callback) as client:
            return await call_wipe(client, "m2")

    result = anyio.run(main)
    assert result.is_error and "cancelled" in text_of(result)
    assert world.pending() == []


def test_http_handshake_era_gets_the_job_to_follow(world: World) -> None:
    async def main() -> Any:
        async with mcp_http(world.server.url + "/mcp", "legacy", {"X-API-Key": world.alice}) as client:
            return await call_wipe(client, "m3")

    result = anyio.run(main)
    assert result.is_error
    job = result.structured_content["job"]
    assert f"GET /jobs/{job}" in text_of(result) and "toolrun jobs tail" in text_of(result)
    world.decide(job)
    view = world.users.view("alice", job).json()
    for _ in range(100):
        if view["status"] == "succeeded":
            break
        anyio.run(anyio.sleep, 0.1)
        view = world.users.view("alice", job).json()
    assert view["status"] == "succeeded" and view["result"]["body"] == "wiped m3\n"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_stdio_asks_and_an_approver_on_the_console_decides(world: World, tmp_path: Path, mode: str) -> None:
    """stdio: the server runs as alice (TOOLRUN_API_KEY); the operator approves from `toolrun jobs approve`,
    which runs the call; the waiting MCP call then answers its result."""
    asked: list[str] = []
    env = {**world.server.env, "TOOLRUN_API_KEY": world.alice}

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        job = params.message.split("(job ", 1)[1].split(")", 1)[0]
        done = await anyio.to_thread.run_sync(
            lambda: toolrun_cli("jobs", "approve", job, "-c", str(world.server.catalog), env=world.server.env)
        )
        assert done.returncode == 0, done.stderr
        return types.ElicitResult(action="accept")

    async def main() -> Any:
        async with mcp_stdio(
            world.server.home, env=env, mode=mode, catalog=world.server.catalog, elicitation_callback=callback
        ) as client:
            return await call_wipe(client, f"s-{mode}")

    result = anyio.run(main)
    assert not result.is_error, text_of(result)
    assert text_of(result) == f"wiped s-{mode}\n" and len(asked) == 1


def test_stdio_handshake_client_without_elicitation_gets_the_job(world: World) -> None:
    env = {**world.server.env, "TOOLRUN_API_KEY": world.alice}

    async def main() -> Any:
        async with mcp_stdio(world.server.home, env=env, mode="legacy", catalog=world.server.catalog) as client:
            return await call_wipe(client, "s3")

    result = anyio.run(main)
    assert result.is_error and "awaits the decision" in text_of(result)
    assert [j["job"] for j in world.pending()] == [result.structured_content["job"]]
    assert json.loads(json.dumps(result.structured_content))["status"] == "awaiting_approval"
