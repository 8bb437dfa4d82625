"""Holes that hostile callers and careless operators found (issue 10), each closed: real `toolrun serve`.

Log lines, forwarded headers, slow bodies, file descriptors, processes that escape a timeout,
and tools that reach into the server through /proc: each needs the real process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.http import JSON
from support.keys import mint_key
from support.mcp import ServeProcess
from support.procs import pids_matching, proc_stat
from support.servers import Processes, ToolrunServer, wait_until
from support.sysusers import UserServer, shared_dir, unprivileged

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
    assert b"RequestTimeout: request body not received within 1 second" in answer
    assert 0.9 < took < 4, took


# -- items 4, 5 and 6: the server process itself -----------------------------------------------------------------

PROC_CATALOG = """\
version: 1
group: p
tools:
  - name: noargs
    public: true
    description: Says ok.
    exec: printf ok
  - name: environ
    public: true
    description: Reads the server's environment through /proc.
    exec: tr '\\0' '\\n' < /proc/$PPID/environ | grep '^PROBE_SECRET='
  - name: write
    public: true
    description: Writes into every pipe the server holds, through /proc.
    exec: >-
      for f in /proc/$PPID/fd/*; do case "$(readlink "$f")" in pipe:*)
      printf 'FORGED-BY-A-TOOL ' 2>/dev/null > "$f" && printf 'wrote ';; esac; done; ls /proc/$PPID/fd >/dev/null
  - name: escape
    public: true
    description: Leaves its process group three ways, then outlives its timeout.
    timeout: 1
    params:
      - name: m
        type: int
    exec: >-
      setsid sleep 71.{{ m }} &
      (setsid sleep 72.{{ m }} &) ;
      python3 -c 'import os, sys; os.setpgid(0, 0);
      os.fork() or os.execvp("sleep", ["sleep", "73." + sys.argv[1]]); os.wait()' {{ m }} &
      sleep 74.{{ m }}
  - name: hold
    public: true
    description: Runs long, part of it outside its process group.
    timeout: 120
    params:
      - name: m
        type: int
    exec: setsid sleep 81.{{ m }} & sleep 82.{{ m }}
"""


def marker() -> int:
    return int.from_bytes(os.urandom(3), "big") + 1000


def survivors(*patterns: str) -> list[int]:
    return [pid for pattern in patterns for pid in pids_matching(pattern)]


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_a_tool_running_as_the_servers_user_cannot_open_the_servers_proc_entries(tmp_path: Path) -> None:
    user = unprivileged()
    with shared_dir(user, prefix="toolrun-proc-") as base:  # a folder the other user can use (pytest's are root-only)
        catalog = write_catalog(base, PROC_CATALOG)
        catalog.chmod(0o644)
        settings = {"PROBE_SECRET": "operator-secret-123"}
        with UserServer(base, catalog, user, settings).start() as server:
            assert f"Uid:\t{user[0]}" in Path(f"/proc/{server.pid}/status").read_text()
            with httpx.Client(base_url=server.url, timeout=20) as client:
                environ = client.post("/tools/p.environ", headers=JSON).text
                written = client.post("/tools/p.write", headers=JSON).text
            server.stop()
            log = server.log()
        assert "operator-secret-123" not in environ, (environ, written)
        assert "Permission denied" in environ, environ
        assert "FORGED-BY-A-TOOL" not in written and "wrote" not in written, written
        assert "Permission denied" in written, written
        assert "FORGED-BY-A-TOOL" not in log
        assert "serving as root" not in log


def test_serving_as_root_warns_at_start_and_points_to_user(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the warning is for a server running as root")
    catalog = write_catalog(tmp_path, CATALOG)
    with ToolrunServer(tmp_path / "server", catalog).start() as server:
        server.stop()
        log = server.log()
    assert "WARNING toolrun.server: serving as root" in log and "`user:`" in log, log


def test_processes_that_leave_the_group_die_at_the_timeout(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, PROC_CATALOG)
    m = marker()
    patterns = [f"sleep {n}.{m}" for n in (71, 72, 73, 74)]
    try:
        with ToolrunServer(tmp_path / "server", catalog).start() as server:
            with httpx.Client(base_url=server.url, timeout=20) as client:
                response = client.post("/tools/p.escape", json={"m": m})
            assert response.text == "(-1, '', 'timeout after 1s')", response.text
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: not survivors(*patterns), 3, "the escaped processes to die")
            assert survivors(*patterns) == []
    finally:
        kill_all(survivors(*patterns))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_tools_processes_die_with_a_server_killed_by_sigkill(tmp_path: Path, workers: int) -> None:
    catalog = write_catalog(tmp_path, PROC_CATALOG)
    m = marker()
    patterns = [f"sleep 81.{m}", f"sleep 82.{m}"]
    try:
        with ToolrunServer(tmp_path / "server", catalog, {"SVC_WORKERS": workers}).start() as server:

            def call() -> None:
                with contextlib.suppress(httpx.HTTPError):  # the server dies under this call
                    httpx.post(server.url + "/tools/p.hold", json={"m": m}, timeout=30)

            caller = threading.Thread(target=call, daemon=True)
            caller.start()
            wait_until(lambda: all(pids_matching(p) for p in patterns), 10, "the tool's processes")
            # The process that runs the call (the server, or the worker that took it) is SIGKILLed alone: no
            # shutdown, no cleanup of its own.
            runner = pids_matching(patterns[1])[-1]
            while workers > 1 and (stat := proc_stat(runner)) is not None and stat[1] != server.pid:
                runner = stat[1]  # up to the worker: the supervisor's child
            if workers == 1:
                runner = server.pid
            os.kill(runner, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: not survivors(*patterns), 5, "the tool's processes to die with the server")
            assert survivors(*patterns) == []
    finally:
        kill_all(survivors(*patterns))


def _limits(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise LookupError("Max open files")


def test_the_soft_open_files_limit_is_raised_to_the_hard_one_at_start(tmp_path: Path) -> None:
    prlimit = require_binary("prlimit")
    catalog = write_catalog(tmp_path, CATALOG)
    server = ToolrunServer(tmp_path / "server", catalog)
    argv = [prlimit, "--nofile=64:4096", "--", sys.executable, "-m", "toolrun", "serve", "-c", str(catalog)]
    with server:
        server.spawn([*argv, "--port", str(server.port)], server.env)
        server.ready()
        assert _limits(server.pid) == (4096, 4096)


def test_out_of_descriptors_the_server_logs_a_line_a_second_and_recovers_when_connections_drop(
    tmp_path: Path,
) -> None:
    prlimit = require_binary("prlimit")
    catalog = write_catalog(tmp_path, CATALOG)
    server = ToolrunServer(tmp_path / "server", catalog, {"SVC_WORKERS": 2})
    argv = [prlimit, "--nofile=64:64", "--", sys.executable, "-m", "toolrun", "serve", "-c", str(catalog)]
    with server:
        server.spawn([*argv, "--port", str(server.port)], server.env)
        server.ready()
        held = []
        try:
            for _ in range(150):  # more than the 64 descriptors: the rest wait in the listen backlog
                held.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
            time.sleep(3)  # three seconds out of descriptors (this is what is measured: no event to wait for)
            log = server.log()
        finally:
            for sock in held:
                sock.close()
        with httpx.Client(timeout=2) as client:
            wait_until(
                lambda: client.get(server.url + "/healthz").status_code == 200,
                10,
                "/healthz once the connections are gone",
                interval=0.1,
            )
    reports = [line for line in log.splitlines() if "cannot accept connections" in line]
    assert 1 <= len(reports) <= 2 * 5, log[-3000:]  # each of the 2 workers: at most a line a second
    assert "Too many open files" in reports[0] and "failed accept(s) since the last report" in reports[0]
    assert "Traceback" not in log
    assert len(log) < 20_000, len(log)
