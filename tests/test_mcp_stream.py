"""MCP clients over HTTP learn of a catalog reload (issue 11.3), against a real `toolrun serve`:

- handshake-era clients (`Mcp-Session-Id`) through the `GET /mcp` event stream of their session, with one
  process and with two workers (whichever worker holds the stream announces its own reload);
- 2026-07-28 clients through `subscriptions/listen`;
- a stream is its session owner's only, DELETE ends it (on any worker), and SIGTERM ends every stream at once.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from support.catalogs import write_catalog
from support.keys import create_key
from support.mcp import MODERN_VERSION, RELOADING, mcp_stdio, text_of
from support.servers import ToolrunServer, wait_until

V1 = """
version: 1
group: ops
tools:
  - name: one
    exec: printf one
"""
V2 = V1 + "  - name: two\n    exec: printf two\n"
V3 = V2 + "  - name: three\n    exec: printf three\n"
STREAM = {"Accept": "text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
BOUND = 10.0  # seconds a notification may take (a poll interval is 0.2 s)


def start(tmp_path: Path, workers: int, **settings: str) -> tuple[ToolrunServer, Path, str, str]:
    catalog = write_catalog(tmp_path, V1)
    env = {"SVC_RELOAD_INTERVAL": "0.2", "SVC_WORKERS": str(workers), "SVC_MCP_DIRECT": "true", **settings}
    server = ToolrunServer(tmp_path, catalog, env)
    return server, catalog, create_key(server.env, "root", "admin"), create_key(server.env, "olga", "ops")


@pytest.fixture(params=[1, 2], ids=["one-process", "two-workers"])
def workers(request: pytest.FixtureRequest) -> int:
    return int(request.param)


def test_a_handshake_client_over_http_is_told_of_each_reload_and_lists_the_new_tools(
    tmp_path: Path, workers: int
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    server, catalog, admin, olga = start(tmp_path, workers)
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        if "ToolListChanged" in type(message).__name__:
            seen.append(message)

    async def notified(count: int) -> None:
        with anyio.fail_after(BOUND):
            while len(seen) < count:
                await anyio.sleep(0.05)

    async def settled() -> int:
        # How many notifications once none came for a second: the other worker's notice of the same change may
        # come after its next poll, which a loaded machine delays past the 0.5 s this once waited.
        with anyio.fail_after(BOUND):
            while True:
                count = len(seen)
                await anyio.sleep(1.0)
                if len(seen) == count:
                    return count

    async def listed(c: Any, name: str) -> list[str]:
        # With two workers the one that told the client may not be the one answering its tools/list: the other
        # reloads at its next poll (0.2 s here), the window docs/deployment.md states. Never longer than that.
        with anyio.fail_after(1.0):
            while name not in (names := [t.name for t in (await c.list_tools()).tools]):
                await anyio.sleep(0.05)
        return names

    async def called(c: Any, name: str) -> str:
        # The call too may reach the worker that has not reloaded yet: within the same window, never longer.
        with anyio.fail_after(1.0):
            while (result := await c.call_tool(name, {})).is_error:
                await anyio.sleep(0.05)
        return str(text_of(result))

    async def main(url: str) -> None:
        async with (
            httpx2.AsyncClient(headers={"X-API-Key": olga}, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy", message_handler=on_message) as c,
        ):
            tools = c.server_capabilities.tools
            assert tools is not None and tools.list_changed is True  # announced: the stream delivers it
            assert "ops__two" not in [t.name for t in (await c.list_tools()).tools]
            await anyio.sleep(0.5)  # the client opens its GET stream after `initialized`

            catalog.write_text(V2)  # the poll
            await notified(1)
            assert "ops__two" in await listed(c, "ops__two")
            assert await called(c, "ops__two") == "two"
            # Each process that swapped tells the streams it holds: a client whose GET stream was opened again on
            # the other worker (one stream per session and process) may hear of one change twice, never of none.
            told = await settled()  # past the other worker's poll (0.2 s here; later on a loaded machine)

            catalog.write_text(V3 + "    description: {{ broken\n  - name: [\n")  # a failed reload: nothing sent
            async with httpx2.AsyncClient() as plain:
                with anyio.fail_after(BOUND):
                    while (await plain.get(server.url + "/readyz")).status_code != 503:
                        await anyio.sleep(0.05)
            await anyio.sleep(0.5)
            assert len(seen) == told  # a failed reload tells nobody

            catalog.write_text(V3)
            async with httpx2.AsyncClient() as plain:
                answer = await plain.post(server.url + "/admin/reload", headers={"X-API-Key": admin})
            assert answer.status_code == 200, answer.text
            await notified(told + 1)
            assert "ops__three" in await listed(c, "ops__three")

    with server.start():
        anyio.run(main, server.url + "/mcp")
        assert "Traceback" not in server.log()


def test_a_2026_client_listens_for_tool_list_changes(tmp_path: Path) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    server, catalog, _, olga = start(tmp_path, 1)

    async def main(url: str) -> list[str]:
        async with (
            httpx2.AsyncClient(headers={"X-API-Key": olga}, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode=MODERN_VERSION) as c,
        ):
            return await tools_after_a_change(c, catalog)

    with server.start():
        assert "ops__two" in anyio.run(main, server.url + "/mcp")


def initialize(url: str, key: str | None) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Accept": "application/json, text/event-stream", **({"X-API-Key": key} if key else {})}
    answer = httpx.post(url, json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["capabilities"]["tools"]["listChanged"] is True
    return answer.headers["mcp-session-id"]


class OpenStream:
    """GET /mcp read in a thread: the bytes so far, and whether (and when) the server ended it."""

    def __init__(self, url: str, sid: str, key: str | None) -> None:
        self.chunks: list[bytes] = []
        self.status = 0
        self.sid = sid
        self.ended_at: float | None = None
        headers = {**STREAM, "Mcp-Session-Id": sid, **({"X-API-Key": key} if key else {})}
        self.thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self.thread.start()
        wait_until(lambda: self.chunks, BOUND, "the stream's first bytes")

    def _read(self, url: str, headers: dict[str, str]) -> None:
        try:
            with httpx.stream("GET", url, headers=headers, timeout=httpx.Timeout(5, read=60)) as answer:
                self.status = answer.status_code
                for chunk in answer.iter_raw():
                    self.chunks.append(chunk)
        except httpx.HTTPError as exc:
            self.chunks.append(repr(exc).encode())
        self.ended_at = time.monotonic()

    def text(self) -> str:
        return b"".join(self.chunks).decode()


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[tuple[ToolrunServer, str, str]]:
    server, _, _, olga = start(tmp_path, 2, SVC_MCP_STREAM_KEEPALIVE="0.3", SVC_SHUTDOWN_GRACE="30")
    bob = create_key(server.env, "bob", "ops")
    with server.start():
        yield server, olga, bob


def test_a_stream_is_its_owners_only_keeps_alive_and_ends_when_the_session_is_deleted(
    two_workers: tuple[ToolrunServer, str, str],
) -> None:
    server, olga, bob = two_workers
    url = server.url + "/mcp"
    sid = initialize(url, olga)
    for key in (bob, None):  # another user's session, or an anonymous caller: as if it did not exist
        headers = {**STREAM, "Mcp-Session-Id": sid, **({"X-API-Key": key} if key else {})}
        refused = httpx.get(url, headers=headers)
        assert refused.status_code == 404 and refused.json()["error"]["message"] == "Session not found"
    made_up = httpx.get(url, headers={**STREAM, "Mcp-Session-Id": "nope", "X-API-Key": olga})
    assert made_up.status_code == 404
    assert httpx.get(url, headers={**STREAM, "X-API-Key": olga}).status_code == 400  # a stream needs a session
    no_sse = httpx.get(url, headers={"Accept": "application/json", "Mcp-Session-Id": sid, "X-API-Key": olga})
    assert no_sse.status_code == 406

    stream = OpenStream(url, sid, olga)
    assert stream.status == 200
    wait_until(lambda: ": keep-alive" in stream.text(), BOUND, "a keep-alive comment")
    # DELETE lands on either worker: a stream on the other one ends at its next keep-alive.
    deleted_at = time.monotonic()
    assert httpx.delete(url, headers={"Mcp-Session-Id": sid, "X-API-Key": olga}).status_code == 200
    wait_until(lambda: stream.ended_at, BOUND, "the stream to end with its session")
    assert stream.ended_at is not None and stream.ended_at - deleted_at < 3
    assert server.alive()


def test_sigterm_ends_open_streams_and_the_server_exits_0_promptly(two_workers: tuple[ToolrunServer, str, str]) -> None:
    server, olga, _ = two_workers
    url = server.url + "/mcp"
    streams = [OpenStream(url, initialize(url, olga), olga) for _ in range(4)]  # on both workers, most likely
    assert all(s.status == 200 for s in streams)
    stopped_at = time.monotonic()
    server.send(signal.SIGTERM)
    code = server.wait(timeout=15)
    took = time.monotonic() - stopped_at
    assert code == 0, server.log()
    assert took < 5, f"the drain waited {took:.1f}s for streams (shutdown_grace is 30 s)"
    wait_until(lambda: all(s.ended_at for s in streams), BOUND, "every stream to end")
    assert "Traceback" not in server.log()


def test_streams_are_capped_per_process_and_a_second_get_of_a_session_replaces_its_stream(tmp_path: Path) -> None:
    server, _, _, olga = start(tmp_path, 1, SVC_MCP_MAX_STREAMS="1")
    with server.start():
        url = server.url + "/mcp"
        first, other = initialize(url, olga), initialize(url, olga)
        stream = OpenStream(url, first, olga)
        full = httpx.get(url, headers={**STREAM, "Mcp-Session-Id": other, "X-API-Key": olga})
        assert full.status_code == 503 and full.headers["retry-after"] and "at most 1" in full.text
        again = OpenStream(url, first, olga)  # the same session reconnecting: the newer stream wins
        wait_until(lambda: stream.ended_at, BOUND, "the replaced stream to end")
        assert again.ended_at is None and again.status == 200


def test_an_anonymous_flood_of_streams_gets_its_share_and_a_keyed_user_still_opens_a_stream(tmp_path: Path) -> None:
    server, _, _, olga = start(tmp_path, 1, SVC_MCP_MAX_STREAMS="12", SVC_MCP_MAX_STREAMS_PER_CALLER="4")
    with server.start():
        url = server.url + "/mcp"
        flood = [OpenStream(url, initialize(url, None), None) for _ in range(12)]  # one address, no key
        held = [s for s in flood if s.status == 200]
        refused = [s for s in flood if s.status == 503]
        assert len(held) == 4 and len(refused) == 8, [s.status for s in flood]
        assert "at most 4 per caller" in refused[0].text()
        mine = OpenStream(url, initialize(url, olga), olga)  # the keyed user's own stream
        assert mine.status == 200 and mine.ended_at is None, mine.text()
        # A stream that ends gives its place back: the flooder may open one more, and no more.
        assert httpx.delete(url, headers={"Mcp-Session-Id": held[0].sid}).status_code == 200
        wait_until(lambda: held[0].ended_at, BOUND, "the deleted session's stream to end")
        assert OpenStream(url, initialize(url, None), None).status == 200
        assert OpenStream(url, initialize(url, None), None).status == 503


def test_a_per_caller_share_above_half_the_total_is_held_to_half(tmp_path: Path) -> None:
    server, _, _, olga = start(tmp_path, 1, SVC_MCP_MAX_STREAMS="6", SVC_MCP_MAX_STREAMS_PER_CALLER="10")
    with server.start():
        url = server.url + "/mcp"
        flood = [OpenStream(url, initialize(url, None), None) for _ in range(6)]  # one address, no key
        held = [s for s in flood if s.status == 200]
        assert len(held) == 3, [s.status for s in flood]
        assert "at most 3 per caller" in next(s for s in flood if s.status == 503).text()
        mine = OpenStream(url, initialize(url, olga), olga)
        assert mine.status == 200 and mine.ended_at is None, mine.text()


def test_listen_streams_count_towards_the_same_share_of_a_caller(tmp_path: Path) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    server, _, _, olga = start(tmp_path, 1, SVC_MCP_MAX_STREAMS_PER_CALLER="1")

    async def main(url: str) -> str:
        async with (
            httpx2.AsyncClient(headers={"X-API-Key": olga}, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode=MODERN_VERSION) as c,
            c.listen(tools_list_changed=True),
        ):
            try:
                async with c.listen(tools_list_changed=True):
                    return "a second stream was opened"
            except Exception as exc:
                return str(exc)

    with server.start():
        assert "at most 1 per caller" in anyio.run(main, server.url + "/mcp")


def test_a_2026_client_over_stdio_listens_for_tool_list_changes(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, V1)

    async def main() -> list[str]:
        with (tmp_path / "stderr.txt").open("w") as errlog:
            home = tmp_path / "home"
            async with mcp_stdio(home, env=RELOADING, errlog=errlog, mode=MODERN_VERSION, catalog=catalog) as c:
                return await tools_after_a_change(c, catalog)

    assert "ops__two" in anyio.run(main)


async def tools_after_a_change(client: Any, catalog: Path) -> list[str]:
    """Listen for tool list changes, change the catalog, wait (bounded) for the event; the tool names then."""
    from mcp.shared.subscriptions import ToolsListChanged

    async with client.listen(tools_list_changed=True) as sub:
        catalog.write_text(V2)
        with anyio.fail_after(BOUND):
            event = await sub.__anext__()
        assert isinstance(event, ToolsListChanged)
    return [t.name for t in (await client.list_tools()).tools]


def test_a_client_that_stops_reading_loses_its_stream_after_the_write_deadline() -> None:
    """The hub alone (a real client cannot stall a write quickly: the kernel buffers megabytes of keep-alives):
    a `send` that never completes stands for a client whose socket is full."""
    from toolrun.server.mcp.stream import StreamHub
    from toolrun.state.memory import MemoryMcpSessions

    async def main() -> tuple[float, int, list[Any]]:
        sessions = MemoryMcpSessions()
        await sessions.open("s1", "user:olga")
        hub = StreamHub(sessions, keepalive=0.05, write_timeout=0.3, max_streams=5)
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)
            if message["type"] == "http.response.body" and len(sent) > 2:
                await anyio.sleep_forever()  # the client stopped reading: the write never drains

        async def receive() -> Any:
            await anyio.sleep_forever()

        scope = {"type": "http", "method": "GET", "headers": [(b"accept", b"text/event-stream")]}
        started = time.monotonic()
        with anyio.fail_after(5):
            await hub.serve("s1", "user:olga", scope, receive, send)
        return time.monotonic() - started, len(hub.streams), sent

    took, open_streams, sent = anyio.run(main)
    assert sent[0]["status"] == 200 and sent[1]["body"].startswith(b"retry:")
    assert sent[2]["body"] == b": keep-alive\r\n\r\n"  # the write that never finished
    assert 0.3 <= took < 2 and open_streams == 0
