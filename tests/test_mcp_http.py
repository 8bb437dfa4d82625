"""MCP over streamable HTTP at /mcp on a real `toolrun serve` (loopback), with the SDK's own client.

Both protocol eras: a handshake-era client (`mode="legacy"`, protocol 2025-06-18/2025-11-25,
`Mcp-Session-Id`) and a 2026-07-28 client (no handshake, no session). One server process is
shared by the module; the shared rate-limit bucket test starts its own with `--rate-limit`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import MCPError
from prometheus_client.parser import text_string_to_metric_families

from support.keys import mint_key
from support.mcp import (
    ALL_KEYS,
    HANDSHAKE_VERSIONS,
    META_TOOLS,
    MODERN_VERSION,
    OPS_KEYS,
    PUBLIC_KEYS,
    ServeProcess,
    mcp_http,
    text_of,
)

ERAS = ["legacy", MODERN_VERSION]
MCP_POST_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
)


@dataclass
class Served:
    server: ServeProcess
    olga: str  # group ops
    ada: str  # group admin
    bob: str  # group ops, another user

    @property
    def url(self) -> str:
        return self.server.mcp_url


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("http")
    home = base / "home"
    keys = {
        "olga": mint_key(home, "olga", ["ops"], email="olga@example.com"),
        "ada": mint_key(home, "ada", ["admin"]),
        "bob": mint_key(home, "bob", ["ops"]),
    }
    with ServeProcess(home, base / "serve.log") as server:
        yield Served(server, **keys)


def on(url: str, mode: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    """Connect an SDK client in `mode`, run `body(client)`, disconnect."""

    async def main() -> Any:
        async with mcp_http(url, mode, headers) as client:
            return await body(client)

    return anyio.run(main)


def call(url: str, mode: str, name: str, arguments: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    async def body(client: Any) -> Any:
        return await client.call_tool(name, arguments)

    return on(url, mode, body, headers)


def remember(value: str, session: str | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"key": "pub.remember", "arguments": {"value": value}}
    if session is not None:
        args["session"] = session
    return args


# -- both eras: listing and every meta-tool -------------------------------------------------------


@pytest.mark.parametrize("mode", ERAS)
def test_both_protocol_eras_connect_and_list_the_meta_tools(served: Served, mode: str) -> None:
    async def body(client: Any) -> tuple[str, list[str]]:
        return client.protocol_version, [t.name for t in (await client.list_tools()).tools]

    version, names = on(served.url, mode, body)
    if mode == "legacy":
        assert version in HANDSHAKE_VERSIONS
    else:
        assert version == MODERN_VERSION
    assert names == META_TOOLS


def test_an_auto_mode_client_settles_on_the_2026_protocol(served: Served) -> None:
    async def body(client: Any) -> str:
        return str(client.protocol_version)

    assert on(served.url, "auto", body) == MODERN_VERSION


@pytest.mark.parametrize("mode", ERAS)
def test_both_protocol_eras_call_every_meta_tool(served: Served, mode: str) -> None:
    async def body(client: Any) -> list[Any]:
        return [
            await client.call_tool("execute", {"key": "pub.echo", "arguments": {"msg": f"via {mode}"}}),
            await client.call_tool("execute", {"key": "pub.fail"}),
            await client.call_tool("search", {"query": "echo"}),
            await client.call_tool("describe_tools", {"keys": ["pub.count", "ops.restart"]}),
            await client.call_tool("whoami", {}),
        ]

    echoed, failed, searched, described, whoami = on(served.url, mode, body, {"X-API-Key": served.olga})
    assert not any(r.is_error for r in (echoed, failed, searched, described, whoami))
    assert text_of(echoed) == f"via {mode}"
    assert failed.structured_content["returncode"] == 3
    assert [i["key"] for i in searched.structured_content["items"]] == ["pub.echo", "pub.count"]
    assert [t["key"] for t in described.structured_content["tools"]] == ["pub.count", "ops.restart"]
    assert whoami.structured_content == {
        "username": "olga",
        "email": "olga@example.com",
        "groups": ["ops"],
        "tools": OPS_KEYS,
    }


# -- identity and scoping -----------------------------------------------------------------------------


def headers_for(served: Served, caller: str) -> tuple[str, dict[str, str]]:
    """(url, headers) for a caller: anonymous, a grouped user by X-API-Key, an admin by Bearer,
    a grouped user by ?api-key=."""
    if caller == "anonymous":
        return served.url, {}
    if caller == "grouped":
        return served.url, {"X-API-Key": served.olga}
    if caller == "admin":
        return served.url, {"Authorization": f"Bearer {served.ada}"}
    return f"{served.url}?api-key={served.olga}", {}


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize(
    ("caller", "username", "tools"),
    [
        ("anonymous", "", PUBLIC_KEYS),
        ("grouped", "olga", OPS_KEYS),
        ("admin", "ada", ALL_KEYS),
        ("query-key", "olga", OPS_KEYS),
    ],
)
def test_each_caller_sees_and_runs_exactly_the_tools_of_its_groups(
    served: Served, mode: str, caller: str, username: str, tools: list[str]
) -> None:
    url, headers = headers_for(served, caller)

    async def body(client: Any) -> tuple[Any, ...]:
        whoami = await client.call_tool("whoami", {})
        restart = await client.call_tool("execute", {"key": "ops.restart", "arguments": {"service": "db"}})
        payroll = await client.call_tool("execute", {"key": "finance.payroll"})
        searched = await client.call_tool("search", {"limit": 100})
        return whoami.structured_content, restart, payroll, searched.structured_content

    whoami, restart, payroll, searched = on(url, mode, body, headers)
    assert whoami["username"] == username
    assert whoami["tools"] == tools
    assert [i["key"] for i in searched["items"]] == tools
    for key, result in (("ops.restart", restart), ("finance.payroll", payroll)):
        if key in tools:
            assert result.is_error is False
        else:
            assert result.is_error is True
            assert text_of(result).startswith(f"No tool {key!r} is available to you.")


def test_an_api_key_header_wins_over_the_query_parameter(served: Served) -> None:
    result = call(f"{served.url}?api-key=trk_not_a_key", MODERN_VERSION, "whoami", {}, {"X-API-Key": served.ada})
    assert result.structured_content["username"] == "ada"


@pytest.mark.parametrize(
    "headers",
    [{"X-API-Key": "trk_abcdefghij_not-a-real-key-at-all-000000"}, {"Authorization": "Bearer nope"}],
    ids=["x-api-key", "bearer"],
)
def test_an_invalid_key_on_mcp_is_a_401_before_any_mcp_handling(served: Served, headers: dict[str, str]) -> None:
    response = httpx.post(served.url, headers={**MCP_POST_HEADERS, **headers}, content=INITIALIZE)
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized"}
    bad_query = httpx.post(f"{served.url}?api-key=trk_nope", headers=MCP_POST_HEADERS, content=INITIALIZE)
    assert bad_query.status_code == 401


def test_a_repeated_api_key_query_parameter_is_refused_like_on_the_rest_routes(served: Served) -> None:
    url = f"{served.url}?api-key={served.olga}&api-key={served.ada}"
    response = httpx.post(url, headers=MCP_POST_HEADERS, content=INITIALIZE)
    assert response.status_code == 401
    rest = httpx.get(f"{served.server.base_url}/whoami?api-key={served.olga}&api-key={served.ada}")
    assert rest.status_code == 401


@pytest.mark.parametrize("mode", ERAS)
def test_the_sdk_client_cannot_connect_with_an_invalid_key(served: Served, mode: str) -> None:
    async def body(client: Any) -> Any:
        return await client.call_tool("whoami", {})

    with pytest.raises(ExceptionGroup) as caught:
        on(served.url, mode, body, {"X-API-Key": "trk_nope"})
    assert caught.group_contains(MCPError)


# -- DNS rebinding and cross-origin requests -------------------------------------------------------


def test_a_request_to_mcp_with_a_foreign_host_header_is_refused(served: Served) -> None:
    response = httpx.post(
        served.url, headers={**MCP_POST_HEADERS, "Host": "evil.example"}, content=INITIALIZE, timeout=10
    )
    assert response.status_code in (400, 421)
    assert "mcp-session-id" not in response.headers


def test_a_cross_origin_post_to_mcp_is_refused(served: Served) -> None:
    response = httpx.post(
        served.url, headers={**MCP_POST_HEADERS, "Origin": "http://evil.example"}, content=INITIALIZE, timeout=10
    )
    assert response.status_code == 403


def test_the_same_request_from_an_allowed_host_is_served(served: Served) -> None:
    response = httpx.post(served.url, headers=MCP_POST_HEADERS, content=INITIALIZE, timeout=10)
    assert response.status_code == 200
    assert response.headers["mcp-session-id"]


# -- session values -----------------------------------------------------------------------------------


def test_a_handshake_era_client_keeps_session_values_across_calls_of_its_mcp_session(served: Served) -> None:
    async def body(client: Any) -> list[str]:
        return [text_of(await client.call_tool("execute", remember(v))) for v in ("a", "b", "c")]

    headers = {"X-API-Key": served.olga}
    assert on(served.url, "legacy", body, headers) == ["unset|True", "a|True", "b|True"]
    # A new connection is a new Mcp-Session-Id, so a new session.
    assert on(served.url, "legacy", body, headers) == ["unset|True", "a|True", "b|True"]


def test_a_sessionless_2026_client_without_a_session_name_runs_identity_only(served: Served) -> None:
    async def body(client: Any) -> list[str]:
        return [text_of(await client.call_tool("execute", remember(v))) for v in ("a", "b")]

    assert on(served.url, MODERN_VERSION, body, {"X-API-Key": served.olga}) == ["unset|False", "unset|False"]


def test_a_sessionless_2026_client_keeps_values_in_a_named_session_that_other_users_never_see(
    served: Served,
) -> None:
    def one(key: str, value: str, session: str = "s1") -> str:
        return text_of(call(served.url, MODERN_VERSION, "execute", remember(value, session), {"X-API-Key": key}))

    assert one(served.bob, "bob-1") == "unset|True"
    assert one(served.bob, "bob-2") == "bob-1|True"  # across connections: the name is the session
    assert one(served.ada, "ada-1") == "unset|True"  # the same name, another user
    assert one(served.bob, "bob-3", session="s2") == "unset|True"  # another name
    assert one(served.bob, "bob-4") == "bob-2|True"


def test_post_tools_runs_identity_only_and_writes_nothing_back(served: Served) -> None:
    def mcp(value: str) -> str:
        return text_of(
            call(served.url, MODERN_VERSION, "execute", remember(value, "s-post"), {"X-API-Key": served.ada})
        )

    assert mcp("kept") == "unset|True"
    response = httpx.post(
        f"{served.server.base_url}/tools/pub.remember",
        json={"value": "from-post"},
        headers={"X-API-Key": served.ada},
    )
    assert response.status_code == 200
    assert response.text == "unset|False"  # no session values visible ...
    assert mcp("next") == "kept|True"  # ... and nothing written back


# -- one rate-limit bucket and one count per call, whatever the door ----------------------------------


def samples(metrics_text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_mcp_and_post_tools_share_one_rate_limit_bucket_and_each_call_is_counted_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    olga, ada = mint_key(home, "olga", ["ops"]), mint_key(home, "ada", ["admin"])
    limited = ServeProcess(home, tmp_path / "serve.log", ["--rate-limit"], env={"SVC_RATE_LIMIT_CALLS": "2"})
    with limited, httpx.Client(base_url=limited.base_url, headers={"X-API-Key": olga}) as http:

        def mcp(key: str, mode: str, arguments: dict[str, Any], api_key: str = olga) -> Any:
            return call(limited.mcp_url, mode, "execute", {"key": key, "arguments": arguments}, {"X-API-Key": api_key})

        # MCP, then POST, then MCP again: the third call is limited.
        assert text_of(mcp("pub.count", MODERN_VERSION, {"n": 1})) == "1"
        assert http.post("/tools/pub.count", json={"n": 2}).text == "2"
        third = mcp("pub.count", "legacy", {"n": 3})
        assert third.is_error is True
        assert text_of(third).startswith("Rate limited: retry after ")
        # POST, then MCP, then POST again: the third call is limited.
        assert http.post("/tools/pub.echo", json={"msg": "a"}).text == "a"
        assert text_of(mcp("pub.echo", "legacy", {"msg": "b"})) == "b"
        refused = http.post("/tools/pub.echo", json={"msg": "c"})
        assert refused.status_code == 429
        assert refused.headers["retry-after"] in refused.text
        # The bucket is per (user, tool): another user is not limited.
        assert text_of(mcp("pub.count", MODERN_VERSION, {"n": 4}, api_key=ada)) == "4"

        metrics = http.get("/metrics").text
    calls = samples(metrics, "svc_tool_calls_total")
    assert calls[(("outcome", "ok"), ("tool", "pub.count"))] == 3
    assert calls[(("outcome", "rate_limited"), ("tool", "pub.count"))] == 1
    assert calls[(("outcome", "ok"), ("tool", "pub.echo"))] == 2
    assert calls[(("outcome", "rate_limited"), ("tool", "pub.echo"))] == 1
    assert sum(calls.values()) == 7
    durations = samples(metrics, "svc_tool_call_duration_seconds_count")
    assert durations == {(("tool", "pub.count"),): 4, (("tool", "pub.echo"),): 3}
