"""Plain HTTP against a real server: the JSON content type and a request with almost no client-side cost; and
`local_http`, a real HTTP server on loopback in a thread, for the tools that call out (curl tools).

(The in-process app of the HTTP tests, with its Starlette TestClient, is support.app.)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

JSON = {"content-type": "application/json"}


async def raw_call(
    port: int, method: str, path: str, body: bytes = b"", headers: Mapping[str, str] | None = None
) -> tuple[int, dict[str, str], bytes, float]:
    """One HTTP/1.1 request on its own connection, with almost no client-side cost (a load test's
    client must not be its bottleneck): (status, headers, body, seconds). `Connection: close`."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        if body or method == "POST":
            head += f"Content-Length: {len(body)}\r\n"
        writer.write(head.encode() + b"\r\n" + body)
        answer = await reader.read(-1)
    finally:
        writer.close()
    took = time.perf_counter() - started
    raw_head, _, content = answer.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines[0].startswith("HTTP/1.1 ") else 0
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, fields, content, took


@contextlib.contextmanager
def local_http(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served on a free loopback port from a thread until the block ends: its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
