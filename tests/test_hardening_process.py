"""Holes that hostile callers and careless operators found (issue 10), each closed: real `toolrun serve`.

Log lines, forwarded headers, slow bodies, file descriptors, processes that escape a timeout,
and tools that reach into the server through /proc: each needs the real process.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import write_catalog
from fixtures.mcp_support import ServeProcess, mint_key
from helpers_servers import JSON, Processes, ToolrunServer

CATALOG = """\
version: 1
group: h
tools:
  - name: noargs
    public: true
    description: Says ok.
    exec: printf ok
"""


def raw(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes and read the answer until the server closes the connection (or `timeout`)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            chunks.append(b"<client timeout>")
        return b"".join(chunks)


# -- item 2: log forging ---------------------------------------------------------------------------------------


FORGED = '127.0.0.1 "GET /admin/delete-everything HTTP/1.1" 200 0.1ms'


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_newline_in_the_request_path_cannot_forge_a_log_line(tmp_path: Path, fmt: str) -> None:
    catalog = write_catalog(tmp_path, CATALOG)
    settings = {"SVC_LOG_LEVEL": "info", "SVC_LOG_FORMAT": fmt}
    with ToolrunServer(tmp_path / "server", catalog, settings).start() as server:
        evil = "/tools/x%0D%0A2026-01-01 00:00:00,000 INFO toolrun.access: " + FORGED.replace(" ", "%20")
        with httpx.Client(base_url=server.url, timeout=10) as client:
            assert client.get(evil.replace('"', "%22")).status_code == 404
            assert client.post("/tools/h%0Anoargs", headers=JSON).status_code == 404
        server.stop()
        lines = server.log().splitlines()
    assert not any(line.startswith("2026-01-01") for line in lines), lines
    access = [line for line in lines if "toolrun.access" in line and "/tools/x" in line]
    assert len(access) == 1, lines
    if fmt == "text":
        assert "\\r\\n2026-01-01 00:00:00,000 INFO toolrun.access" in access[0]
    else:
        for line in lines:  # every line, uvicorn's and toolrun's, is one JSON object
            json.loads(line)
        entry = json.loads(access[0])
        assert entry["logger"] == "toolrun.access" and entry["level"] == "info"
        assert entry["path"].startswith("/tools/x\r\n2026-01-01") and entry["method"] == "GET"
        assert entry["status"] == 404 and entry["client"] == "127.0.0.1" and entry["query"] == ""
        assert isinstance(entry["ms"], float) and entry["ts"].endswith("Z")


# -- item 10: forwarded headers only from configured proxies ---------------------------------------------------


def test_x_forwarded_for_from_an_unlisted_peer_cannot_split_an_anonymous_rate_limit_bucket(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG)
    limited = {"SVC_RATE_LIMIT_ENABLED": True, "SVC_RATE_LIMIT_CALLS": 1, "SVC_RATE_LIMIT_WINDOW": 3600}
    with Processes() as procs:
        default = procs.add(ToolrunServer(tmp_path / "default", catalog, limited))
        proxied = procs.add(
            ToolrunServer(tmp_path / "proxied", catalog, {**limited, "SVC_FORWARDED_ALLOW_IPS": "127.0.0.1"})
        )
        for server in (default, proxied):
            server.start()

        def statuses(server: ToolrunServer) -> list[int]:
            with httpx.Client(base_url=server.url, timeout=10) as client:
                return [
                    client.post("/tools/h.noargs", headers={**JSON, "X-Forwarded-For": f"10.9.9.{n}"}).status_code
                    for n in (1, 2, 3)
                ]

        # No proxy configured: the header is ignored, every call is the loopback peer's one bucket.
        assert statuses(default) == [200, 429, 429]
        # The proxy at 127.0.0.1 is trusted: each forwarded client has its own bucket.
        assert statuses(proxied) == [200, 200, 200]


# -- items 3, 11 and 14 on /mcp: a real server with the MCP test catalog ----------------------------------------


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, dict[str, str]]]:
    base = tmp_path_factory.mktemp("mcp-harden")
    home = base / "home"
    keys = {name: mint_key(home, name, ["ops"]) for name in ("alice", "bob")}
    with ServeProcess(home, base / "serve.log", env={"SVC_REQUEST_TIMEOUT": "1"}) as server:
        yield server, keys


MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def rpc(method: str, params: dict[str, Any], rid: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def handshake(client: httpx.Client, url: str, key: str | None) -> str:
    """Open a handshake-era MCP session as `key` (None: anonymous); its Mcp-Session-Id."""
    headers = {**MCP_HEADERS, **({"X-API-Key": key} if key else {})}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    response = client.post(url, content=rpc("initialize", params), headers=headers)
    assert response.status_code == 200, response.text
    sid = response.headers["mcp-session-id"]
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    assert client.post(url, content=note, headers={**headers, "Mcp-Session-Id": sid}).status_code == 202
    return sid


def execute(
    client: httpx.Client, url: str, key: str | None, sid: str | None, arguments: dict[str, Any]
) -> httpx.Response:
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": "2025-06-18"}
    if key:
        headers["X-API-Key"] = key
    if sid:
        headers["Mcp-Session-Id"] = sid
    return client.post(url, content=rpc("tools/call", {"name": "execute", "arguments": arguments}, 7), headers=headers)


def result_text(response: httpx.Response) -> str:
    """The text of a tools/call answer, JSON or a one-event SSE stream."""
    body = response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        body = next(line[5:] for line in body.splitlines() if line.startswith("data:"))
    result = json.loads(body)["result"]
    return str(result["content"][0]["text"])


def test_a_session_id_used_with_another_users_key_is_not_found_and_cannot_be_deleted(
    mcp_server: tuple[ServeProcess, dict[str, str]],
) -> None:
    server, keys = mcp_server
    remember = {"key": "pub.remember", "arguments": {"value": "alice-secret"}}
    with httpx.Client(timeout=10) as client:
        sid = handshake(client, server.mcp_url, keys["alice"])
        assert result_text(execute(client, server.mcp_url, keys["alice"], sid, remember)) == "unset|True"
        # bob (and an anonymous caller) with alice's session id: the SDK's own "Session not found"
        for other in (keys["bob"], None):
            stolen = execute(client, server.mcp_url, other, sid, {**remember, "arguments": {"value": "x"}})
            assert stolen.status_code == 404, stolen.text
            assert "Session not found" in stolen.text
            headers = {"Mcp-Session-Id": sid, **({"X-API-Key": other} if other else {})}
            assert client.delete(server.mcp_url, headers=headers).status_code == 404
        # alice's session is intact and still hers
        again = execute(client, server.mcp_url, keys["alice"], sid, {**remember, "arguments": {"value": "2"}})
        assert result_text(again) == "alice-secret|True"
        assert (
            client.delete(server.mcp_url, headers={"Mcp-Session-Id": sid, "X-API-Key": keys["alice"]}).status_code
            == 200
        )


def test_anonymous_callers_never_share_a_named_session_and_long_names_are_refused(
    mcp_server: tuple[ServeProcess, dict[str, str]],
) -> None:
    server, keys = mcp_server
    with httpx.Client(timeout=10) as client:
        sid = handshake(client, server.mcp_url, None)
        named = {"key": "pub.remember", "arguments": {"value": "anon-1"}, "session": "shared"}
        answer = result_text(execute(client, server.mcp_url, None, sid, named))
        assert "a named `session` needs an API key" in answer, answer
        # an anonymous handshake session keeps its own values (its id is minted by the server)
        plain = {"key": "pub.remember", "arguments": {"value": "a"}}
        assert result_text(execute(client, server.mcp_url, None, sid, plain)) == "unset|True"
        other = handshake(client, server.mcp_url, None)
        assert result_text(execute(client, server.mcp_url, None, other, plain)) == "unset|True"
        long_name = {"key": "pub.remember", "arguments": {"value": "x"}, "session": "s" * 201}
        alice = handshake(client, server.mcp_url, keys["alice"])
        answer = result_text(execute(client, server.mcp_url, keys["alice"], alice, long_name))
        assert "`session` is 201 characters long; a session name has at most 200" in answer, answer
        ok = {**long_name, "session": "s" * 200}
        assert result_text(execute(client, server.mcp_url, keys["alice"], alice, ok)) == "unset|True"


def test_mcp_refuses_duplicate_json_keys_like_post_tools(mcp_server: tuple[ServeProcess, dict[str, str]]) -> None:
    server, keys = mcp_server
    with httpx.Client(timeout=10) as client:
        sid = handshake(client, server.mcp_url, keys["alice"])
        body = (
            b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute","arguments":'
            b'{"key":"pub.echo","arguments":{"msg":"first","msg":"second"}}}}'
        )
        headers = {**MCP_HEADERS, "X-API-Key": keys["alice"], "Mcp-Session-Id": sid}
        response = client.post(server.mcp_url, content=body, headers=headers)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == -32700 and "duplicate key 'msg'" in error["message"], error
        rest = client.post(server.base_url + "/tools/pub.echo", content=b'{"msg":"first","msg":"second"}', headers=JSON)
        assert rest.status_code == 400 and "duplicate key 'msg'" in rest.text
        nan = body.replace(b'"second"', b"NaN").replace(b'"msg":"first",', b"")
        assert client.post(server.mcp_url, content=nan, headers=headers).status_code == 400


@pytest.mark.parametrize("route", ["/mcp", "/tools/pub.echo"])
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_half_a_body_gets_408_after_request_timeout_on_every_route(
    mcp_server: tuple[ServeProcess, dict[str, str]], route: str, framing: str
) -> None:
    server, _ = mcp_server
    head = (
        f"POST {route} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
    )
    if framing == "chunked":
        data = (head + 'Transfer-Encoding: chunked\r\n\r\n5\r\n{"jso\r\n').encode()
    else:
        data = (head + 'Content-Length: 200\r\n\r\n{"jsonrpc": "2.0"').encode()
    started = time.monotonic()
    answer = raw(server.port, data, timeout=6)
    took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout"), answer[:200]
    assert b"RequestTimeout: request body not received within 1 seconds" in answer
    assert 0.9 < took < 4, took
