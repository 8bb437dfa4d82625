"""The sixth red team on callers' limits: a hostile anonymous caller against a real `toolrun serve` behind a proxy
(loopback only; the proxy's forwarded addresses are sent as a proxy would). The test failed on the code before its
fix.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from support.servers import serve_catalog

CATALOG = "group: pub\ntools:\n  - name: echo\n    public: true\n    exec: echo hi\n"


def _calls(url: str, addresses: list[str]) -> list[int]:
    """One anonymous call from each forwarded address (as the proxy in `forwarded_allow_ips` says it)."""
    with httpx.Client(timeout=30) as client:
        return [
            client.post(f"{url}/tools/pub.echo", json={}, headers={"x-forwarded-for": address}).status_code
            for address in addresses
        ]


def test_an_anonymous_ipv6_client_gets_one_rate_limit_bucket_for_its_network_not_one_per_address(
    tmp_path: Path,
) -> None:
    """Anonymous callers are told apart by address, and each address had a rate-limit bucket of its own: an IPv6
    client, which holds a /64 network at least (2**64 addresses), made 6 calls from 6 of its addresses against a
    limit of 3 and none was refused. Anonymous IPv6 callers are now told apart by their /64 network (an IPv4
    address still by itself)."""
    settings = {"SVC_RATE_LIMIT_ENABLED": True, "SVC_RATE_LIMIT_CALLS": 3, "SVC_FORWARDED_ALLOW_IPS": "127.0.0.1"}
    with serve_catalog(tmp_path, CATALOG, settings, args=("--workers", "1")).start() as server:
        one_network = _calls(server.url, [f"2001:db8:0:1::{n:x}" for n in range(1, 7)])
        another_network = _calls(server.url, ["2001:db8:0:2::1"])
        ipv4 = _calls(server.url, ["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"])
    assert one_network == [200, 200, 200, 429, 429, 429], one_network
    assert another_network == [200], another_network  # another network is another caller
    assert ipv4 == [200, 200, 200, 200], ipv4  # an IPv4 address is a caller by itself


def test_one_caller_opening_sessions_in_a_loop_never_pushes_out_anothers() -> None:
    """A one-process server keeps MCP sessions and fn session values in memory, at most 10,000 of each, the least
    recently used going first: one anonymous client sending `initialize` in a loop (or one key calling an fn tool
    with ever new session names) pushed every other caller's session out, and their next request was `404 Session
    not found` (their session values gone). Each caller now holds at most a tenth of a store: past it, its own
    oldest session goes. (The stores as the server builds them, with a bound of 100 instead of 10,000.)"""
    from toolrun.state.memory import MemoryMcpSessions, MemorySessions

    async def go() -> tuple[str | None, dict[str, object], int]:
        mcp, values = MemoryMcpSessions(max_sessions=100), MemorySessions(max_sessions=100)
        await mcp.open("bobs-session", "user:bob")
        await values.save("user:bob\x1fwork", {"draft": "bob's"})
        for n in range(1000):
            await mcp.open(f"flood-{n}", "anon:203.0.113.9")
            await values.save(f"user:mallory\x1fname-{n}", {"n": n})
        flood_kept = sum([await mcp.owner(f"flood-{n}") is not None for n in range(1000)])
        latest = await mcp.owner("flood-999")
        assert latest == "anon:203.0.113.9"  # the flood's own latest sessions stay
        return await mcp.owner("bobs-session"), await values.load("user:bob\x1fwork"), flood_kept

    bob, draft, flood_kept = asyncio.run(go())
    assert bob == "user:bob", "one anonymous client's initialize loop pushed bob's MCP session out"
    assert draft == {"draft": "bob's"}, "one key's new session names pushed bob's session values out"
    assert flood_kept == 10  # a tenth of the bound: the flood pushed out its own
