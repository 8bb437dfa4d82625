"""How every road reads a request (server/request.py): the head once, the body by one reader with one cap.

A body over `max_body_bytes` (announced by Content-Length or streamed in chunks), or one that arrives slower
than `request_timeout`, gets each road's own answer: `Type: message` text on POST /tools/{key}, the JSON error of
the JSON routes, a JSON-RPC error on /mcp. A header given twice: its first value counts everywhere, except the
ones a door refuses to see twice (Host, Mcp-Session-Id); a list header (Prefer) may be split over several lines.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.app import BASE_URL, Server, build, servers
from support.http import JSON
from support.mcp import MODERN_VERSION

LIMIT = 500
TEXT = "text/plain; charset=utf-8"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "reading", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
MODERN = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MODERN_VERSION,
    "Mcp-Method": "tools/call",
    "Mcp-Name": "execute",
}


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    with servers(tmp_path) as factory:
        yield factory


@pytest.fixture
def server(make: Callable[..., Server]) -> Server:
    return make({"max_body_bytes": LIMIT})


def rpc_error(status: int, code: int, message: str) -> tuple[int, str, bytes]:
    """What /mcp answers when it refuses a request before MCP handling: status, content type, exact body."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()
    return status, "application/json", body


def answer(response: httpx.Response) -> tuple[int, str, bytes]:
    return response.status_code, response.headers["content-type"], response.content


def echo_call(msg: str) -> bytes:
    """A 2026-07-28 `tools/call` of pub.echo through `execute`."""
    params = {"name": "execute", "arguments": {"key": "pub.echo", "arguments": {"msg": msg}}, "_meta": ENVELOPE}
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}).encode()


def framed(body: bytes, framing: str) -> bytes | Iterator[bytes]:
    """The body as is (httpx announces its Content-Length) or as chunks of 50 bytes with no Content-Length."""
    if framing == "content-length":
        return body
    return iter([body[i : i + 50] for i in range(0, len(body), 50)])


# -- one cap, each road's answer -------------------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_max_body_bytes_gets_each_roads_own_413(server: Server, framing: str) -> None:
    big = b'{"msg": "' + b"x" * LIMIT + b'"}'
    rest = server.client.post("/tools/pub.echo", content=framed(big, framing), headers=JSON)
    assert answer(rest) == (413, TEXT, f"PayloadTooLarge: request body is larger than {LIMIT} bytes".encode())
    mcp = server.client.post("/mcp", content=framed(echo_call("x" * LIMIT), framing), headers=MODERN)
    assert answer(mcp) == rpc_error(413, -32600, f"Payload Too Large: the body is over {LIMIT} bytes")


def test_a_body_at_the_cap_is_read_whole_on_both_roads(server: Server) -> None:
    body = b'{"msg": "' + b"x" * (LIMIT - 11) + b'"}'
    assert len(body) == LIMIT
    rest = server.client.post("/tools/pub.echo", content=framed(body, "chunked"), headers=JSON)
    assert (rest.status_code, rest.text) == (200, "x" * (LIMIT - 11))
    call = echo_call("hi")
    assert len(call) < LIMIT
    call += b" " * (LIMIT - len(call))  # whitespace up to the very limit: still JSON
    mcp = server.client.post("/mcp", content=framed(call, "chunked"), headers=MODERN)
    assert mcp.status_code == 200, mcp.text
    result = mcp.json()
    assert result["id"] == 7 and result["result"]["content"][0]["text"] == "hi", result


def test_an_mcp_body_of_any_content_type_is_capped_with_the_json_rpc_413(server: Server) -> None:
    """A body the SDK would refuse for its type is still capped by the door, in the door's words."""
    headers = {**MODERN, "Content-Type": "text/plain"}
    mcp = server.client.post("/mcp", content=b"x" * (LIMIT + 1), headers=headers)
    assert answer(mcp) == rpc_error(413, -32600, f"Payload Too Large: the body is over {LIMIT} bytes")


def test_the_reason_body_of_a_job_decision_is_capped_too(server: Server) -> None:
    alice = server.key("alice", ["ops"])
    reason = json.dumps({"reason": "y" * 1000}).encode()
    headers = {**JSON, "X-API-Key": alice}
    for framing in ("content-length", "chunked"):
        response = server.client.post("/jobs/no-such-job/approve", content=framed(reason, framing), headers=headers)
        assert response.status_code == 413, response.text
        assert response.json() == {"error": f"request body is larger than {LIMIT} bytes"}
    small = server.client.post("/jobs/no-such-job/approve", content=b'{"reason": "ok"}', headers=headers)
    assert small.status_code == 404, small.text  # read and checked: then the job is looked for


def test_a_content_length_that_is_no_number_is_a_400_on_both_roads(server: Server) -> None:
    async def post(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
        sent: list[dict[str, Any]] = []
        scope = {
            "type": "http",
            "method": "POST",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "scheme": "http",
            "query_string": b"",
            "headers": [(b"host", b"127.0.0.1"), (b"content-length", b"12x"), *headers],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 80),
            "http_version": "1.1",
        }

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await server.app(scope, receive, send)
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

    rest = asyncio.run(post("/tools/pub.echo", [(b"content-type", b"application/json")]))
    assert rest == (400, b"UsageError: Content-Length is not a number")
    modern = [(k.lower().encode(), v.encode()) for k, v in MODERN.items()]
    mcp = asyncio.run(post("/mcp", modern))
    assert mcp == (400, rpc_error(400, -32600, "Bad Request: Content-Length is not a number")[2])


# -- one deadline ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/tools/pub.echo", "/mcp"])
def test_a_body_slower_than_request_timeout_gets_a_408_on_both_roads(tmp_path: Path, path: str) -> None:
    """In process (no uvicorn and its protocol's own deadline): the door's reader keeps the deadline itself."""
    app, _ = build(tmp_path, {"request_timeout": 0.2})

    async def main() -> httpx.Response:
        stall = asyncio.Event()

        async def body() -> AsyncIterator[bytes]:
            yield b'{"msg": '
            await stall.wait()

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            return await client.post(path, content=body(), headers=MODERN if path == "/mcp" else JSON)

    response = asyncio.run(main())
    if path == "/mcp":
        expected = rpc_error(408, -32600, "Request Timeout: request body not received within 0.2 seconds")
    else:
        expected = (408, TEXT, b"RequestTimeout: request body not received within 0.2 seconds")
    assert answer(response) == expected


# -- headers given twice ---------------------------------------------------------------------------------------


def test_the_first_of_a_repeated_header_counts(server: Server) -> None:
    alice = server.key("alice", ["ops"])
    body = b'{"msg": "hi"}'
    first_json = [("Content-Type", "application/json"), ("Content-Type", "text/plain")]
    assert server.client.post("/tools/pub.echo", content=body, headers=first_json).text == "hi"
    first_text = [("Content-Type", "text/plain"), ("Content-Type", "application/json")]
    refused = server.client.post("/tools/pub.echo", content=body, headers=first_text)
    refusal = b"UnsupportedMediaType: Content-Type must be application/json, not 'text/plain'"
    assert answer(refused) == (415, TEXT, refusal)
    keys = [("X-API-Key", alice), ("X-API-Key", "trk_aaaaaaaaaa_" + "b" * 43)]
    assert server.client.get("/whoami", headers=keys).json()["username"] == "alice"
    # The Origin checked is the first one too, as the MCP SDK checks it (a browser never sends two).
    same_first = [*JSON.items(), ("Origin", BASE_URL), ("Origin", "http://evil.example")]
    assert server.client.post("/tools/pub.echo", content=body, headers=same_first).text == "hi"
    evil_first = [*JSON.items(), ("Origin", "http://evil.example"), ("Origin", BASE_URL)]
    assert server.client.post("/tools/pub.echo", content=body, headers=evil_first).status_code == 403


def test_two_host_or_two_mcp_session_id_headers_are_refused(server: Server) -> None:
    hosts = [("Host", "127.0.0.1"), ("Host", "127.0.0.1"), *JSON.items()]
    response = server.client.post("/tools/pub.echo", content=b"{}", headers=hosts)
    assert answer(response) == (400, TEXT, b"Duplicate Host header")
    sessions = [*MODERN.items(), ("Mcp-Session-Id", "a"), ("Mcp-Session-Id", "b")]
    mcp = server.client.post("/mcp", content=echo_call("hi"), headers=sessions)
    assert answer(mcp) == rpc_error(400, -32600, "Bad Request: more than one Mcp-Session-Id header")


def test_a_prefer_list_split_over_two_lines_is_read_whole(server: Server) -> None:
    alice = server.key("alice", ["ops"])
    headers = [*JSON.items(), ("X-API-Key", alice), ("Prefer", "wait=5"), ("Prefer", "respond-async")]
    response = server.client.post("/tools/pub.echo", content=b'{"msg": "hi"}', headers=headers)
    assert response.status_code == 202, response.text
    assert response.headers["preference-applied"] == "respond-async"
