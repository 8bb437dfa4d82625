"""The /mcp fast path answers byte for byte what the MCP SDK answers, in both protocol eras.

Two real `toolrun serve` processes with the same catalog (tests/fixtures/mcp_fast_tools.yaml),
settings and users: one as shipped (plain `tools/call` requests answered by the fast path in
front of the SDK), one with `TOOLRUN_SPEEDUPS=mcp_fast_path` (every request through
the SDK). Each request goes to both; status, headers (but `date`, and the value of a freshly
minted `Mcp-Session-Id`) and body bytes must be equal. The servers run with debug logging, and
the fast path logs each request it answers: every case also says which path must answer it on
the fast server, so a fast path that quietly declined everything would fail here too.

Cases: a result, structured output of every JSON kind, tool errors, a timeout, invalid arguments,
an unknown and a hidden tool, a secret param, a rate limit, named and Mcp-Session-Id sessions,
the meta-tools, direct mode, and requests the fast path must leave to the SDK (bad envelopes,
batches, notifications, other methods, an SSE-only Accept, mismatched routing headers,
`Mcp-Param-*` headers, params the SDK's validation refuses). The audit trails of the two servers (door
`mcp-http`, secrets as `[secret]`) hold the same records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest

from support.catalogs import FIXTURES
from support.keys import mint_key
from support.mcp import MODERN_VERSION, ServeProcess, mcp_http

CATALOG = FIXTURES / "mcp_fast_tools.yaml"
RATE_LIMIT = 30  # calls per (user, tool) and minute; only `hasty` gets near it
FAST_LINE = "MCP fast path: tools/call"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "diff", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@dataclass
class Side:
    server: ServeProcess
    keys: dict[str, str]
    http: httpx.Client
    _offset: int = 0
    _count: int = 0

    def fast_lines(self) -> int:
        """How many requests the fast path has answered so far (its debug lines; the log is read on from last time)."""
        with self.server.log_path.open("rb") as log:
            log.seek(self._offset)
            text = log.read()
        complete = text[: text.rfind(b"\n") + 1]
        self._offset += len(complete)
        self._count += complete.count(FAST_LINE.encode())
        return self._count


@dataclass
class Pair:
    fast: Side
    sdk: Side


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    base = tmp_path_factory.mktemp("mcpfast")
    env = {
        "SVC_MCP_DIRECT": "true",
        "SVC_RATE_LIMIT_ENABLED": "true",
        "SVC_RATE_LIMIT_CALLS": str(RATE_LIMIT),
    }
    sides = []
    for name, extra in (("fast", {"TOOLRUN_SPEEDUPS": "on"}), ("sdk", {"TOOLRUN_SPEEDUPS": "mcp_fast_path"})):
        home = base / name
        keys = {
            user: mint_key(home, user, groups) for user, groups in (("alice", []), ("olga", ["ops"]), ("hasty", []))
        }
        audit = {"SVC_AUDIT_LOG": str(base / f"{name}.audit.jsonl")}
        server = ServeProcess(
            home, base / f"{name}.log", ["--log-level", "debug"], {**env, **audit, **extra}, catalog=CATALOG
        )
        sides.append(Side(server.start(), keys, httpx.Client(timeout=30)))
    try:
        yield Pair(*sides)
    finally:
        for side in sides:
            side.http.close()
            side.server.stop()


def rpc(method: str, params: Any = None, rid: Any = 1, **extra: Any) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method, **extra}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def call(name: str, arguments: Any = None, rid: Any = 1, modern: bool = True) -> bytes:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if modern:
        params["_meta"] = ENVELOPE
    return rpc("tools/call", params, rid)


def handshake_headers(key: str, version: str) -> dict[str, str]:
    return {
        "X-API-Key": key,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
    }


def modern_headers(key: str, name: str = "execute", method: str = "tools/call") -> dict[str, str]:
    return {**handshake_headers(key, MODERN_VERSION), "Mcp-Method": method, "Mcp-Name": name}


def seen(response: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    """What the client sees: status, headers in order (no date; a session id as a placeholder), body."""
    headers = [
        (k, "<session>" if k == "mcp-session-id" else v) for k, v in response.headers.multi_items() if k != "date"
    ]
    return response.status_code, headers, response.content


_RETRY = re.compile(rb"retry after \d+ seconds?")


def assert_same(fast: httpx.Response, sdk: httpx.Response, case: str) -> None:
    a, b = seen(fast), seen(sdk)
    if a != b and _RETRY.search(a[2]) and _RETRY.search(b[2]):
        # Two servers, one rate limit each: the seconds left in the window may differ by one between them.
        a = (a[0], [h for h in a[1] if h[0] != "content-length"], _RETRY.sub(b"retry after N seconds", a[2]))
        b = (b[0], [h for h in b[1] if h[0] != "content-length"], _RETRY.sub(b"retry after N seconds", b[2]))
    assert a == b, f"{case}: the fast path answered\n{a}\nthe SDK answered\n{b}"


def both(
    pair: Pair, case: str, body: bytes, headers: dict[str, str], fast: bool, **kw: Any
) -> tuple[httpx.Response, httpx.Response]:
    """Send one request to both servers; the answers must be equal, and `fast` says who answered it."""
    responses = []
    for side in (pair.fast, pair.sdk):
        sent = {
            k: (side.keys[v[5:]] if isinstance(v, str) and v.startswith("user:") else v) for k, v in headers.items()
        }
        sent.update(kw.pop(f"{'fast' if side is pair.fast else 'sdk'}_headers", {}))
        before = side.fast_lines()
        responses.append(side.http.post(side.server.mcp_url, content=body, headers=sent))
        answered = side.fast_lines() - before
        expected = int(fast and side is pair.fast)
        assert answered == expected, f"{case}: {answered} fast-path answers on the {side.server.log_path.stem} server"
    assert_same(*responses, case)
    return responses[0], responses[1]


# Each case: (label, body, the name the Mcp-Name header carries, answered by the fast path?); the
# handshake-era test sends the same bodies without the envelope (and no routing headers).
MODERN_CASES: list[tuple[str, bytes, str, bool]] = [
    ("a result", call("execute", {"key": "pub.ping"}), "execute", True),
    ("structured output of every JSON kind", call("execute", {"key": "pub.shape"}), "execute", True),
    ("an fn tool that raises", call("execute", {"key": "pub.boom"}), "execute", True),
    ("a command that exits 3", call("execute", {"key": "pub.fail"}), "execute", True),
    ("a timeout", call("execute", {"key": "pub.slow"}), "execute", True),
    ("an argument out of range", call("execute", {"key": "pub.count", "arguments": {"n": 500}}), "execute", True),
    ("an argument of the wrong type", call("execute", {"key": "pub.count", "arguments": {"n": "x"}}), "execute", True),
    ("arguments that are no object", call("execute", {"key": "pub.count", "arguments": [1]}), "execute", True),
    ("execute without a key", call("execute", {}), "execute", True),
    ("an unknown tool", call("execute", {"key": "pub.nothing"}), "execute", True),
    ("a hidden tool", call("execute", {"key": "ops.restart", "arguments": {"service": "x"}}), "execute", True),
    (
        "a secret that fails its pattern",
        call("execute", {"key": "pub.login", "arguments": {"token": "S3CRET!"}}),
        "execute",
        True,
    ),
    (
        "a secret param",
        call("execute", {"key": "pub.login", "arguments": {"token": "abc", "user": "al"}}),
        "execute",
        True,
    ),
    (
        "a named session, first",
        call("execute", {"key": "pub.remember", "arguments": {"value": "one"}, "session": "s"}),
        "execute",
        True,
    ),
    (
        "a named session, again",
        call("execute", {"key": "pub.remember", "arguments": {"value": "two"}, "session": "s"}),
        "execute",
        True,
    ),
    ("search", call("search", {"query": "ping"}), "search", True),
    ("describe_tools", call("describe_tools", {"keys": ["pub.count", "pub.login", "nope"]}), "describe_tools", True),
    ("whoami", call("whoami", {}), "whoami", True),
    ("whoami without arguments", call("whoami"), "whoami", True),
    ("a direct tool", call("pub__count", {"n": 7}), "pub__count", True),
    ("a direct tool with bad arguments", call("pub__count", {"n": -1}), "pub__count", True),
    ("a hidden direct tool", call("ops__restart", {"service": "x"}), "ops__restart", True),
    ("an unknown tool name", call("nosuch", {}), "nosuch", True),
    ("a lone surrogate in a result", call("execute", {"key": "pub.surrogate"}), "execute", True),
    ("infinity, a tuple, an int key in a result", call("execute", {"key": "pub.odd"}), "execute", True),
    ("a string id", call("execute", {"key": "pub.ping"}, rid="req-7"), "execute", True),
    ("an id of 0", call("execute", {"key": "pub.ping"}, rid=0), "execute", True),
    # Left to the SDK:
    ("a name that is no string", call(5, {}), "5", False),  # type: ignore[arg-type]
    ("tools/call arguments that are no object", call("execute", [1]), "execute", False),
    ("a float id", call("execute", {"key": "pub.ping"}, rid=1.5), "execute", False),
    ("a null id", call("execute", {"key": "pub.ping"}, rid=None), "execute", False),
    ("a boolean id", call("execute", {"key": "pub.ping"}, rid=True), "execute", False),
    ("an Mcp-Name that differs", call("execute", {"key": "pub.ping"}), "whoami", False),
    ("no envelope", call("execute", {"key": "pub.ping"}, modern=False), "execute", False),
    ("an extra envelope member", rpc("tools/call", {"name": "whoami", "_meta": ENVELOPE}, extra=1), "whoami", False),
    ("a batch", b"[" + call("whoami") + b"]", "whoami", False),
    (
        "a notification",
        json.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "whoami"}}).encode(),
        "whoami",
        False,
    ),
    ("jsonrpc 1.0", call("whoami").replace(b'"2.0"', b'"1.0"'), "whoami", False),
]


@pytest.mark.parametrize(("case", "body", "name", "fast"), MODERN_CASES, ids=[c[0] for c in MODERN_CASES])
def test_modern_requests_get_the_sdks_answer(pair: Pair, case: str, body: bytes, name: str, fast: bool) -> None:
    both(pair, case, body, modern_headers("user:alice", name), fast)


def test_modern_requests_with_odd_headers_go_to_the_sdk(pair: Pair) -> None:
    body = call("execute", {"key": "pub.ping"})
    ok = modern_headers("user:alice")
    both(pair, "an event-stream-only Accept", body, {**ok, "Accept": "text/event-stream"}, False)
    both(pair, "Accept: */*", body, {**ok, "Accept": "*/*"}, True)
    both(pair, "Accept: text/html", body, {**ok, "Accept": "text/html"}, False)
    both(pair, "an Mcp-Param header", body, {**ok, "Mcp-Param-Key": "pub.ping"}, False)
    both(
        pair,
        "a JSON content type with a charset",
        body,
        {**ok, "Content-Type": "application/json; charset=utf-8"},
        True,
    )
    both(pair, "a content type of another JSON kind", body, {**ok, "Content-Type": "application/vnd.x+json"}, False)
    both(pair, "a version the server does not speak", body, {**ok, "MCP-Protocol-Version": "2030-01-01"}, False)
    both(pair, "tools/list", rpc("tools/list", {"_meta": ENVELOPE}), {**ok, "Mcp-Method": "tools/list"}, False)
    both(pair, "an unknown method", rpc("tools/nope", {"_meta": ENVELOPE}), {**ok, "Mcp-Method": "tools/nope"}, False)
    both(
        pair,
        "another user (ops)",
        call("execute", {"key": "ops.restart", "arguments": {"service": "db"}}),
        modern_headers("user:olga"),
        True,
    )
    both(pair, "anonymous", body, {k: v for k, v in ok.items() if k != "X-API-Key"}, True)
    both(
        pair,
        "the server's own Origin",
        body,
        ok,
        True,
        fast_headers={"Origin": pair.fast.server.base_url},
        sdk_headers={"Origin": pair.sdk.server.base_url},
    )
    both(pair, "a Host with another port", body, {**ok, "Host": "localhost:1"}, True)
    both(pair, "a key that does not resolve", body, {**ok, "X-API-Key": "trk_0000000000_" + "x" * 43}, False)


def test_a_rate_limit_reads_the_same(pair: Pair) -> None:
    body = call("execute", {"key": "pub.count", "arguments": {"n": 1}})
    limited = 0
    for i in range(RATE_LIMIT + 2):
        response, _ = both(pair, f"call {i + 1} of hasty", body, modern_headers("user:hasty"), True)
        limited += "Rate limited" in response.text
    assert limited == 2


def handshake(pair: Pair, user: str, version: str) -> dict[str, str]:
    """Open an MCP session on both servers (the answers must agree); the session id of each."""
    init = rpc(
        "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "d", "version": "1"}}
    )
    headers = {"X-API-Key": f"user:{user}", "Content-Type": "application/json", "Accept": "application/json"}
    fast, sdk = both(pair, "initialize", init, headers, False)
    return {"fast": fast.headers["mcp-session-id"], "sdk": sdk.headers["mcp-session-id"]}


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_handshake_era_requests_get_the_sdks_answer(pair: Pair, version: str) -> None:
    sids = handshake(pair, "alice", version)
    base = handshake_headers("user:alice", version)

    def send(case: str, body: bytes, fast: bool, **headers: str) -> None:
        both(
            pair,
            case,
            body,
            {**base, **headers},
            fast,
            fast_headers={"Mcp-Session-Id": sids["fast"]},
            sdk_headers={"Mcp-Session-Id": sids["sdk"]},
        )

    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    send("notifications/initialized", note, False)
    for case, body, _name, fast in MODERN_CASES:
        if "named session" in case or "envelope" in case:
            continue  # sessions are Mcp-Session-Id's here; the envelope is the 2026-07-28 form
        body = body.replace(b', "_meta": ' + json.dumps(ENVELOPE).encode(), b"")
        send(case, body, fast or case == "an Mcp-Name that differs")  # no routing headers in this era
    for value in ("one", "two"):  # the Mcp-Session-Id is the session of fn tools
        send(
            "an Mcp-Session-Id session",
            call("execute", {"key": "pub.remember", "arguments": {"value": value}}, modern=False),
            True,
        )
    send("a progress token", rpc("tools/call", {"name": "whoami", "_meta": {"progressToken": 5}}), True)
    send("tools/list", rpc("tools/list", rid=9), False)
    send("ping", rpc("ping", rid=10), False)
    send("an event-stream-only Accept", call("whoami", modern=False), False, Accept="text/event-stream")
    send(
        "a JSON content type with a charset",
        call("whoami", modern=False),
        True,
        **{"Content-Type": "application/json; charset=utf-8"},
    )


def test_a_handshake_session_of_another_user_or_none_is_refused_alike(pair: Pair) -> None:
    sids = handshake(pair, "alice", "2025-11-25")
    body = call("execute", {"key": "pub.ping"}, modern=False)
    headers = {"Content-Type": "application/json", "Accept": "application/json", "MCP-Protocol-Version": "2025-11-25"}
    both(
        pair,
        "another user's session",
        body,
        {**headers, "X-API-Key": "user:olga"},
        False,
        fast_headers={"Mcp-Session-Id": sids["fast"]},
        sdk_headers={"Mcp-Session-Id": sids["sdk"]},
    )
    both(pair, "a made-up session", body, {**headers, "X-API-Key": "user:alice", "Mcp-Session-Id": "f" * 32}, False)
    both(
        pair,
        "no session, no version header",
        body,
        {**headers, "X-API-Key": "user:alice", "MCP-Protocol-Version": ""},
        False,
    )


@pytest.mark.parametrize("mode", ["legacy", MODERN_VERSION])
def test_the_sdk_client_gets_the_same_bytes_from_both_servers(pair: Pair, mode: str) -> None:
    """The SDK's own client, run alike against both servers: every answer it received is equal."""

    async def session(side: Side) -> tuple[list[tuple[str, bytes, int, bytes]], list[Any]]:
        seen_bodies: list[tuple[str, bytes, int, bytes]] = []

        async def keep(response: Any) -> None:
            request = response.request
            if request.method == "GET":  # the handshake client's change stream: open until the client leaves
                seen_bodies.append((request.method, b"", response.status_code, b""))
                return
            await response.aread()
            seen_bodies.append((request.method, request.content, response.status_code, response.content))

        results = []
        async with mcp_http(side.server.mcp_url, mode, {"X-API-Key": side.keys["alice"]}, hooks=[keep]) as client:
            for name, arguments in (
                ("execute", {"key": "pub.ping"}),
                ("execute", {"key": "pub.shape"}),
                ("execute", {"key": "pub.boom"}),
                ("execute", {"key": "pub.count", "arguments": {"n": 101}}),
                ("pub__count", {"n": 3}),
                ("search", {"query": "session"}),
                ("whoami", {}),
            ):
                results.append(await client.call_tool(name, arguments))
        return seen_bodies, results

    fast_bodies, fast_results = anyio.run(session, pair.fast)
    sdk_bodies, sdk_results = anyio.run(session, pair.sdk)
    assert len(fast_bodies) > 7
    assert sorted(fast_bodies) == sorted(sdk_bodies)  # the handshake client's GET runs beside a POST
    assert [r.model_dump() for r in fast_results] == [r.model_dump() for r in sdk_results]
    assert fast_results[0].content[0].text == "pong" and not fast_results[0].is_error
    assert fast_results[1].structured_content["result"]["text"] == 'héllo \u2603 \U0001f600 "quoted" \\ / \n\t'
    assert fast_results[2].is_error and fast_results[3].is_error
    assert fast_results[4].content[0].text == "3"


def test_a_repeated_routing_header_goes_to_the_sdk(pair: Pair) -> None:
    body = call("execute", {"key": "pub.ping"})
    answers = []
    for side in (pair.fast, pair.sdk):
        headers = [(k, v) for k, v in modern_headers(side.keys["alice"]).items()] + [("Mcp-Name", "execute")]
        before = side.fast_lines()
        answers.append(side.http.post(side.server.mcp_url, content=body, headers=headers))
        assert side.fast_lines() == before
    assert_same(*answers, "a repeated Mcp-Name header")
    assert answers[0].status_code == 400 and b"appears more than once" in answers[0].content


def test_the_audit_trails_agree(pair: Pair) -> None:
    """Every call above left the same audit record on both servers (door mcp-http, secrets as [secret]); only
    what differs between any two calls (time, duration, generated request id, the key) is left out."""

    def records(side: Side) -> list[str]:
        path = side.server.log_path.with_name(side.server.log_path.stem + ".audit.jsonl")
        kept = []
        for line in path.read_text().splitlines():
            record = json.loads(line)
            for varying in ("ts", "duration_ms", "request_id", "key_prefix"):
                record.pop(varying, None)
            kept.append(json.dumps(record, sort_keys=True))
        return sorted(kept)

    for arguments in (
        {"key": "pub.ping"},
        {"key": "pub.login", "arguments": {"token": "abc", "user": "al"}},
        {"key": "pub.boom"},
        {"key": "pub.count", "arguments": {"n": 500}},
    ):
        both(pair, f"audit {arguments['key']}", call("execute", arguments), modern_headers("user:olga"), True)
    fast, sdk = records(pair.fast), records(pair.sdk)
    assert len(fast) >= 4
    assert fast == sdk
    doors = {json.loads(r)["door"] for r in fast}
    assert doors == {"mcp-http"}
    logins = [json.loads(r)["args"] for r in fast if json.loads(r)["tool"] == "pub.login"]
    assert logins and all(args.get("token") == "[secret]" for args in logins)


@pytest.mark.parametrize("era", ["2026-07-28", "2025-06-18"])
def test_a_lone_surrogate_in_a_result_is_replaced_never_a_500(pair: Pair, era: str) -> None:
    """An fn tool returning text with a lone surrogate gets "?" in its place, as `POST /tools/{key}` does."""
    body = call("execute", {"key": "pub.surrogate"}, modern=era == MODERN_VERSION)
    if era == MODERN_VERSION:
        fast, _ = both(pair, "a lone surrogate", body, modern_headers("user:alice"), True)
    else:
        sids = handshake(pair, "alice", era)
        headers = handshake_headers("user:alice", era)
        fast, _ = both(
            pair,
            "a lone surrogate",
            body,
            headers,
            True,
            fast_headers={"Mcp-Session-Id": sids["fast"]},
            sdk_headers={"Mcp-Session-Id": sids["sdk"]},
        )
    assert fast.status_code == 200
    result = fast.json()["result"]
    assert result["content"][0]["text"] == "a?b"
    assert not result.get("isError")


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def test_outsized_meta_is_not_remembered(tmp_path: Any) -> None:
    """The fast path remembers validation outcomes per `_meta`; a client sending a different large `_meta` each
    time must not make the server keep each one (40 calls of 0.9 MB kept 34 MB before the size bound)."""
    home = tmp_path / "home"
    key = mint_key(home, "alice", [])
    with (
        ServeProcess(
            home, tmp_path / "serve.log", ["--workers", "1", "--log-level", "debug"], catalog=CATALOG
        ) as server,
        httpx.Client(base_url=server.base_url, timeout=30) as http,
    ):
        assert server.process is not None

        def send(i: int) -> None:
            meta = {**ENVELOPE, "pad": f"{i:06d}" + "x" * 900_000}
            body = json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami", "_meta": meta}}
            )
            response = http.post("/mcp", content=body, headers=modern_headers(key, "whoami"))
            assert response.status_code == 200 and b'"isError":false' in response.content, response.text[:300]

        for i in range(5):
            send(i)
        before = _rss(server.process.pid)
        for i in range(5, 45):
            send(i)
        grown = _rss(server.process.pid) - before
        assert server.log().count(FAST_LINE) == 45  # answered by the fast path, which holds the memos
        assert grown < 16 * 1024 * 1024, f"the server kept {grown // 1024 // 1024} MB for 40 calls"
