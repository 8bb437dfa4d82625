"""`toolrun serve --workers N` on the embedded default (no Redis): one server, several processes.

Each test drives a real server with real worker processes. New connections (no keep-alive) make
the kernel spread the requests over the workers; the tools report the pid of the worker that ran
them, so each test checks that more than one worker was involved before it trusts its answer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from support.keys import mint_key
from support.mcp import MODERN_VERSION, ServeProcess, text_of

CATALOG = """\
version: 1
group: w
tools:
  - name: pid
    public: true
    description: The pid of the worker that runs the call (the shell's parent).
    exec: printf '%s' "$PPID"
  - name: ops_pid
    groups: [ops]
    description: The worker's pid, for group ops only.
    exec: printf '%s' "$PPID"
  - name: nap
    public: true
    description: Sleeps three seconds, then answers with its worker's pid.
    exec: sleep 3; printf '%s' "$PPID"
  - name: remember
    public: true
    description: Returns the session value it saw and its worker's pid, then stores a new one.
    fn: wfns:remember
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
NO_KEEPALIVE = httpx.Limits(max_keepalive_connections=0, max_connections=400)


def catalog(tmp_path: Path) -> Path:
    (tmp_path / "wfns.py").write_text(FNS)
    path = tmp_path / "workers.yaml"
    path.write_text(CATALOG)
    return path


def server(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> ServeProcess:
    return ServeProcess(
        tmp_path / "home", tmp_path / "serve.log", ["--workers", "3", *args], env=env, catalog=catalog(tmp_path)
    )


def worker_pids(server: ServeProcess) -> set[int]:
    assert server.process is not None
    out = subprocess.run(["pgrep", "-P", str(server.process.pid)], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


async def fire(url: str, n: int, headers: dict[str, str] | None = None) -> list[httpx.Response]:
    results: list[httpx.Response] = []
    async with httpx.AsyncClient(limits=NO_KEEPALIVE, timeout=60) as client:

        async def one() -> None:
            results.append(await client.post(url, json={}, headers=headers or {}))

        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
    return results


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[tuple[ServeProcess, str]]:
    home = tmp_path / "home"
    key = mint_key(home, "olga", ["ops"])
    env = {"SVC_RATE_LIMIT_CALLS": "50", "SVC_RATE_LIMIT_WINDOW": "3600"}
    with server(tmp_path, "--rate-limit", env=env) as served:
        yield served, key


def test_one_users_200_calls_at_one_tool_across_workers_pass_exactly_the_limit_of_50(
    limited: tuple[ServeProcess, str],
) -> None:
    served, key = limited
    responses = anyio.run(fire, f"{served.base_url}/tools/w.pid", 200, {"X-API-Key": key})
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {200: 50, 429: 150}
    assert len({r.text for r in responses if r.status_code == 200}) >= 2, "every call landed on one worker"
    assert all(r.headers["retry-after"].isdigit() for r in responses if r.status_code == 429)

    # /metrics, whichever worker answers, counts every call of every worker, each once.
    for _ in range(3):
        text = httpx.get(f"{served.base_url}/metrics").text
        assert 'svc_tool_calls_total{outcome="ok",tool="w.pid"} 50.0' in text
        assert 'svc_tool_calls_total{outcome="rate_limited",tool="w.pid"} 150.0' in text
        assert 'svc_tool_call_duration_seconds_count{tool="w.pid"} 200.0' in text


def test_a_revoked_key_is_refused_at_once_by_every_worker(limited: tuple[ServeProcess, str]) -> None:
    served, _ = limited
    key = mint_key(served.home, "rita", ["ops"])
    pids: set[str] = set()
    for _ in range(10):  # until two workers have served the key (the kernel picks the worker of each connection)
        ok = anyio.run(fire, f"{served.base_url}/tools/w.ops_pid", 20, {"X-API-Key": key})
        assert {r.status_code for r in ok} == {200}
        pids |= {r.text for r in ok}
        if len(pids) >= 2:
            break
    assert len(pids) >= 2, "every call landed on one worker"
    revoke = subprocess.run(
        [served.command[0], "keys", "revoke", key], env=served.env, capture_output=True, text=True, check=False
    )
    assert revoke.returncode == 0, revoke.stderr
    # The key no longer resolves on any worker: 401 on every route.
    refused = anyio.run(fire, f"{served.base_url}/tools/w.ops_pid", 40, {"X-API-Key": key})
    assert {r.status_code for r in refused} == {401}
    assert {httpx.get(f"{served.base_url}/whoami", headers={"X-API-Key": key}).status_code for _ in range(6)} == {401}


def test_a_handshake_mcp_session_and_its_values_follow_the_client_from_worker_to_worker(tmp_path: Path) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def session_calls(url: str, headers: dict[str, str]) -> list[str]:
        limits = httpx2.Limits(max_keepalive_connections=0)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60, limits=limits) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            out: list[str] = []
            for i in range(60):  # until the session has changed workers a few times (new connection per request)
                result = await client.call_tool("execute", {"key": "w.remember", "arguments": {"value": f"v{i}"}})
                out.append(text_of(result))
                if i >= 5 and len({a.split("|")[1] for a in out}) >= 2:
                    break
            return out

    home = tmp_path / "home"
    key = mint_key(home, "olga", ["ops"])
    with server(tmp_path) as served:
        answers = anyio.run(session_calls, served.mcp_url, {"X-API-Key": key})
        seen = [a.split("|")[0] for a in answers]
        assert seen == ["unset", *(f"v{i}" for i in range(len(answers) - 1))]  # each call saw the one before
        assert len({a.split("|")[1] for a in answers}) >= 2, "the session never changed workers"
        # A new client is a new session.
        assert anyio.run(session_calls, served.mcp_url, {"X-API-Key": key})[0].startswith("unset|")


def raw_initialize(url: str, headers: dict[str, str]) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    post = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}
    response = httpx.post(url, json=body, headers=post)
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


def raw_list(url: str, sid: str, headers: dict[str, str]) -> httpx.Response:
    post = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": sid,
        "MCP-Protocol-Version": "2025-06-18",
        **headers,
    }
    return httpx.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=post)


def test_an_mcp_session_is_its_owners_only_and_a_closed_one_is_gone_on_every_worker(tmp_path: Path) -> None:
    home = tmp_path / "home"
    olga, bob = mint_key(home, "olga", ["ops"]), mint_key(home, "bob", ["ops"])
    with server(tmp_path) as served:
        url = served.mcp_url
        sid = raw_initialize(url, {"X-API-Key": olga})
        for _ in range(6):  # new connections: several workers
            assert raw_list(url, sid, {"X-API-Key": olga}).status_code == 200
        assert raw_list(url, sid, {"X-API-Key": bob}).status_code == 404  # not bob's
        assert raw_list(url, sid, {}).status_code == 404  # nor an anonymous caller's
        assert raw_list(url, "made-up-session", {"X-API-Key": olga}).status_code == 404
        # The session's server-to-client stream (tests/test_mcp_stream.py) is its owner's only, on every worker.
        stream = {"Accept": "text/event-stream", "Mcp-Session-Id": sid}
        assert httpx.get(url, headers={**stream, "X-API-Key": bob}).status_code == 404
        with httpx.stream("GET", url, headers={**stream, "X-API-Key": olga}) as get:
            assert get.status_code == 200 and get.headers["content-type"] == "text/event-stream"
        closed = httpx.delete(url, headers={"Mcp-Session-Id": sid, "X-API-Key": olga})
        assert closed.status_code == 200
        for _ in range(6):
            gone = raw_list(url, sid, {"X-API-Key": olga})
            assert gone.status_code == 404 and gone.json()["error"]["message"] == "Session not found"


def test_a_2026_client_is_served_by_any_worker(tmp_path: Path) -> None:
    from support.mcp import mcp_http

    async def body(url: str) -> list[str]:
        async with mcp_http(url, MODERN_VERSION) as client:
            return [text_of(await client.call_tool("execute", {"key": "w.pid"})) for _ in range(3)]

    with server(tmp_path) as served:
        assert all(pid.isdigit() for pid in anyio.run(body, served.mcp_url))


def test_sigterm_drains_every_worker_and_the_server_exits_0(tmp_path: Path) -> None:
    with server(tmp_path) as served:
        assert served.process is not None
        workers = worker_pids(served)
        assert len(workers) == 3
        results: list[Any] = []

        async def calls() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: _collect(results, served.base_url, 9))
                # Until all 9 calls run (a connection still in a listen queue at SIGTERM would be refused).
                for _ in range(200):
                    if len(running_naps(workers)) >= 9:
                        break
                    await anyio.sleep(0.05)
                assert len(running_naps(workers)) == 9
                os.kill(served.process.pid, signal.SIGTERM)  # type: ignore[union-attr]

        anyio.run(calls)
        assert served.process.wait(timeout=15) == 0
        assert [r.status_code for r in results] == [200] * 9
        assert len({r.text for r in results}) >= 2
        for pid in workers:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)


def running_naps(workers: set[int]) -> list[int]:
    """The `sleep 3` shells the workers are running."""
    found = []
    for pid in workers:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                if b"sleep 3" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(int(child))
            except OSError:
                pass
    return found


async def _collect(results: list[Any], base: str, n: int) -> None:
    results.extend(await fire(f"{base}/tools/w.nap", n))


def test_sighup_reaches_the_workers_without_stopping_them_and_a_dead_worker_is_replaced(tmp_path: Path) -> None:
    with server(tmp_path) as served:
        assert served.process is not None
        before = worker_pids(served)
        os.kill(served.process.pid, signal.SIGHUP)
        time.sleep(0.5)
        assert worker_pids(served) == before
        victim = sorted(before)[0]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            now = worker_pids(served)
            if len(now) == 3 and victim not in now:
                break
            time.sleep(0.1)
        assert len(now) == 3 and victim not in now
        responses = anyio.run(fire, f"{served.base_url}/tools/w.pid", 12)
        assert {r.status_code for r in responses} == {200}
        assert "starting a new one" in served.log()


def test_keep_alive_requests_to_a_worker_are_not_held_back_by_nagle(tmp_path: Path) -> None:
    """Each worker's connections have TCP_NODELAY, as a single process's do: without it, every answer on a
    keep-alive connection after the first waits for the client's delayed ACK (40 ms or more on Linux)."""
    import socket as sockets

    with server(tmp_path) as served, sockets.create_connection(("127.0.0.1", served.port)) as conn:
        conn.setsockopt(sockets.IPPROTO_TCP, sockets.TCP_NODELAY, 1)  # this client holds nothing back
        started = time.perf_counter()
        for _ in range(10):
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while not answer.endswith(b'{"status":"ok"}'):
                chunk = conn.recv(65536)
                assert chunk, answer
                answer += chunk
        took = time.perf_counter() - started
    assert took < 0.35, f"10 keep-alive requests took {took:.3f} s (40 ms each: Nagle and delayed ACK)"
