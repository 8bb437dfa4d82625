"""The MCP face: the meta-tools declare the shape of their structured content and behaviour hints; direct mode's
tools/list comes in pages, in key order; a search page's text stays within its token budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from support.catalogs import write_catalog
from support.mcp import CATALOG, META_TOOLS
from toolrun.models import Identity
from toolrun.server.mcp.door import McpDoor, build_server, direct_name
from toolrun.server.mcp.meta import LIST_PAGE, LIST_TTL_MS, OUTPUT_SCHEMAS
from toolrun.service import ToolService
from toolrun.settings import Settings

ANON = Identity(client="10.0.0.7")
ADA = Identity("ada", "ada@example.com", frozenset({"admin"}), anonymous=False)


def service_of(home: Path, catalog: Path) -> ToolService:
    return ToolService.from_paths([str(catalog)], Settings.load(environ={"TOOLRUN_HOME": str(home)}))


def run(service: ToolService, identity: Identity, body: Any, direct: bool = False) -> Any:
    door = McpDoor(service, lambda ctx: identity, direct=direct)

    async def main() -> Any:
        # raise_exceptions=False: a handler's MCPError reaches the client as the JSON-RPC error a transport sends
        async with Client(build_server(door), raise_exceptions=False) as client:
            return await body(client)

    return anyio.run(main)


def test_the_meta_tools_declare_an_output_schema_and_hints(_isolated_home: Path) -> None:
    async def body(client: Any) -> Any:
        return await client.list_tools()

    listed = run(service_of(_isolated_home, CATALOG), ADA, body)
    tools = {t.name: t for t in listed.tools}
    assert list(tools) == META_TOOLS
    for name in META_TOOLS:
        assert tools[name].output_schema == OUTPUT_SCHEMAS[name]
        jsonschema.Draft202012Validator.check_schema(tools[name].output_schema)
    for name in ("search", "describe_tools", "whoami"):
        assert tools[name].annotations.read_only_hint is True
    assert tools["execute"].annotations.read_only_hint is False
    assert listed.ttl_ms == LIST_TTL_MS and listed.cache_scope == "private"


@pytest.mark.parametrize("identity", [ADA, ANON], ids=["admin", "anonymous"])
def test_every_meta_tool_result_matches_its_output_schema(_isolated_home: Path, identity: Identity) -> None:
    calls = [
        ("search", {"query": "echo"}),
        ("search", {"query": "nothing matches this xyzzy"}),
        ("describe_tools", {"keys": ["pub.echo", "no.such"]}),
        ("whoami", {}),
        ("execute", {"key": "pub.echo", "arguments": {"msg": "hi"}}),
        ("execute", {"key": "pub.remember", "arguments": {"value": "v"}}),  # an fn tool
        ("execute", {"key": "pub.fail"}),  # a non-zero exit is a result, not an error
    ]

    async def body(client: Any) -> list[Any]:
        # the SDK's client checks each result against the listed schema (it raises on a mismatch)
        return [await client.call_tool(name, args) for name, args in calls]

    results = run(service_of(_isolated_home, CATALOG), identity, body)
    for (name, _), result in zip(calls, results, strict=True):
        assert not result.is_error, result
        jsonschema.validate(result.structured_content, OUTPUT_SCHEMAS[name])


def big_catalog(directory: Path, n: int) -> Path:
    tools = "".join(
        f"  - name: tool_{i:03d}\n    group: g{i % 7}\n    public: true\n    description: Tool number {i}.\n"
        f"    exec: echo {i}\n"
        for i in reversed(range(n))  # declared out of key order
    )
    return write_catalog(directory, "version: 1\ntools:\n" + tools)


def test_direct_mode_lists_tools_in_pages_in_key_order(_isolated_home: Path, tmp_path: Path) -> None:
    n = 2 * LIST_PAGE + 37
    service = service_of(_isolated_home, big_catalog(tmp_path, n))

    async def body(client: Any) -> tuple[list[list[str]], list[Any]]:
        pages, cursors, cursor = [], [], None
        while True:
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            pages.append([t.name for t in page.tools])
            cursors.append(page.next_cursor)
            if page.next_cursor is None:
                return pages, cursors
            cursor = page.next_cursor

    pages, cursors = run(service, ANON, body, direct=True)
    assert [len(p) for p in pages] == [len(META_TOOLS) + LIST_PAGE, LIST_PAGE, 37]
    assert cursors == [str(LIST_PAGE), str(2 * LIST_PAGE), None]
    names = [name for page in pages for name in page]
    keys = sorted(f"g{i % 7}.tool_{i:03d}" for i in range(n))
    assert names == META_TOOLS + [direct_name(k) for k in keys]
    assert run(service, ANON, body, direct=True)[0] == pages  # the same order every time


def test_direct_mode_refuses_a_cursor_it_did_not_give(_isolated_home: Path, tmp_path: Path) -> None:
    service = service_of(_isolated_home, big_catalog(tmp_path, LIST_PAGE + 1))

    async def body(client: Any) -> Any:
        try:
            await client.list_tools(cursor="banana", cache_mode="bypass")
        except MCPError as exc:
            return exc
        return None

    error = run(service, ANON, body, direct=True)
    assert isinstance(error, MCPError)
    assert error.error.code == -32602  # invalid params
    assert "invalid cursor 'banana'" in error.error.message


def test_a_search_page_text_stays_within_300_tokens_at_p95(tmp_path: Path) -> None:
    from support.catalogs import NOUNS, VERBS, generate_catalog
    from toolrun.catalog import LoadOptions, load
    from toolrun.formatting import search_text
    from toolrun.registry import Registry

    catalog = load([str(write_catalog(tmp_path, generate_catalog(1500)))], {}, LoadOptions())
    registry = Registry(catalog.tools.values())
    admin = Identity(username="admin", groups=frozenset({"admin"}), anonymous=False)
    asked = [f"{verb} {noun}" for verb in VERBS for noun in NOUNS]
    asked += [f"{verb} the {noun} of a target, read-only" for verb in VERBS for noun in NOUNS[:3]]
    asked += ["path", "url", "pattern file ignore_case", "hosts count", "settings ratio", "generated tool number 7"]
    pages = [registry.search(admin, q, 0, 10) for q in asked]
    assert all(len(p.items) == 10 for p in pages)  # full pages: the budget is measured where it is tightest
    tokens = sorted(len(search_text(p.items, p.total, p.offset, p.next_offset)) / 4 for p in pages)
    assert tokens[int(len(tokens) * 0.95)] <= 300
    assert tokens[-1] <= 300  # each line is capped: even the longest page fits


def test_a_long_signature_and_summary_are_cut_in_a_search_line() -> None:
    from toolrun.formatting import SEARCH_LINE, search_line

    sig = "k8s.pod_logs(pod: str, namespace: str = 'default', container: str = None, since: str = '1h', tail: int = 5)"
    line = search_line(sig, "Print the logs of a pod, the last lines first, with the container chosen for you. " * 3)
    assert len(line) <= SEARCH_LINE
    assert line.startswith("k8s.pod_logs(pod: str, namespace: str = 'default', …) - Print the logs of a pod")
    assert line.endswith("…")
