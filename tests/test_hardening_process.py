"""Holes that hostile callers and careless operators found (issue 10), each closed: real `toolrun serve`.

Log lines, forwarded headers, slow bodies, file descriptors, processes that escape a timeout,
and tools that reach into the server through /proc: each needs the real process.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest

from conftest import write_catalog
from helpers_servers import JSON, Processes, ToolrunServer, wait_until

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


# keep the helpers used by later sections imported in one place
_ = (time, wait_until)
