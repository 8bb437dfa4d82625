"""A call does not outlive its client (issue 23.5): against a real `toolrun serve`, a client that hangs up
while its `sleep 25` runs gets the process killed at once (over REST, and MCP over HTTP through the fast
path and through the SDK), its concurrency slot freed, and an audit record that says `cancelled`."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest

from support.catalogs import SLEEPERS, unique_sleep
from support.procs import pids_matching
from support.servers import serve_catalog, wait_until

MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "execute",
}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def request(door: str, seconds: float) -> bytes:
    """The raw HTTP/1.1 request of a `sleep <seconds>` call through `door`."""
    if door == "rest":
        path, headers = "/tools/ops.sleep", {"Content-Type": "application/json"}
        body = json.dumps({"seconds": seconds}).encode()
    else:
        path, headers = "/mcp", MCP_HEADERS
        arguments = {"key": "ops.sleep", "arguments": {"seconds": seconds}}
        params = {"name": "execute", "arguments": arguments, "_meta": META}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode() + b"\r\n" + body


@pytest.mark.parametrize("door", ["rest", "mcp-fast", "mcp-sdk"])
def test_a_call_whose_client_hangs_up_is_killed_frees_its_slot_and_is_audited_as_cancelled(
    tmp_path: Path, door: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    settings = {
        "SVC_MAX_CONCURRENT_CALLS": "1",  # one slot: the next call gets it only if the first one freed it
        "SVC_QUEUE_TIMEOUT": "0",
        "SVC_AUDIT_LOG": str(audit),
    }
    if door == "mcp-sdk":
        settings["TOOLRUN_SPEEDUPS"] = "mcp_fast_path"
    server = serve_catalog(tmp_path, SLEEPERS, settings)
    seconds, marker = unique_sleep(25.0)  # a unique command line: `sleep 25.0xxxxx`
    with server.start():
        client = socket.create_connection(("127.0.0.1", server.port))
        try:
            client.sendall(request(door, seconds))
            wait_until(lambda: pids_matching(marker), 10, "the tool to start")
            time.sleep(1)  # the client waits a second, then hangs up (the scenario of the issue)
        finally:
            client.close()
        wait_until(lambda: not pids_matching(marker), 5, "the tool to be killed once its client left")
        # Its slot is free again: with a cap of one and no queue, a new call runs instead of getting 503.
        answer = httpx.post(server.url + "/tools/ops.hi", json={}, timeout=10)
        assert answer.status_code == 200 and answer.text == "hi", answer.text

        def records() -> list[dict[str, object]]:
            lines = audit.read_text().splitlines() if audit.exists() else []
            return [json.loads(line) for line in lines]

        wait_until(lambda: any(r["tool"] == "ops.sleep" for r in records()), 5, "the audit record of the call")
        sleep = [r for r in records() if r["tool"] == "ops.sleep"]
        assert len(sleep) == 1 and sleep[0]["outcome"] == "cancelled", sleep
        assert sleep[0]["duration_ms"] < 10_000  # type: ignore[operator]
        assert sleep[0]["door"] == ("http" if door == "rest" else "mcp-http")
        log = server.log()
        assert "Traceback" not in log and "Exception in ASGI application" not in log
        path = "/tools/ops.sleep" if door == "rest" else "/mcp"
        assert any(path in line and " 499 " in line for line in log.splitlines()), log  # the access log
