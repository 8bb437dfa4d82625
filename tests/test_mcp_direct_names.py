"""`--mcp-direct` names: unique for every tool, stable, so a hidden tool never hides a visible one.

`a.b.c` and `a__b.c` both mapped to `a__b__c`: whichever came first in the catalog took the name,
so a public tool could be listed and called under a name that was a hidden tool's. Driven through
the MCP SDK's own client, in-process, as tests/test_mcp.py does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from support.catalogs import write_catalog
from toolrun.models import Identity
from toolrun.server.mcp.door import McpDoor, build_server, direct_name, direct_names
from toolrun.service import ToolService
from toolrun.settings import Settings

ANON = Identity(client="10.0.0.7")
ADMIN = Identity("ada", "", frozenset({"admin"}), anonymous=False)

CATALOG = """\
version: 1
tools:
  - name: c
    group: a.b
    exec: printf hidden-a.b.c
  - name: c
    group: a__b
    public: true
    exec: printf public-a__b.c
  - name: echo
    group: pub
    public: true
    exec: printf echo
"""


@pytest.fixture
def service(tmp_path: Path) -> ToolService:
    path = write_catalog(tmp_path, CATALOG)
    return ToolService.from_paths([str(path)], Settings.load(environ={"TOOLRUN_HOME": str(tmp_path / "home")}))


def run(service: ToolService, identity: Identity, body: Any) -> Any:
    door = McpDoor(service, lambda ctx: identity, direct=True)

    async def main() -> Any:
        async with Client(build_server(door)) as client:
            return await body(client)

    return anyio.run(main)


def listed(service: ToolService, identity: Identity) -> dict[str, str | None]:
    async def body(client: Any) -> Any:
        return {t.name: t.title for t in (await client.list_tools()).tools}

    return dict(run(service, identity, body))


def call(service: ToolService, identity: Identity, name: str) -> Any:
    async def body(client: Any) -> Any:
        return await client.call_tool(name, {})

    return run(service, identity, body)


def test_colliding_keys_get_distinct_names_and_the_public_one_is_listed_and_callable(service: ToolService) -> None:
    public_name = direct_name("a__b.c")
    hidden_name = direct_name("a.b.c")
    assert hidden_name == "a__b__c"  # reads back as its key: the plain name
    assert public_name != hidden_name and public_name.startswith("a__b__c_")

    anon = listed(service, ANON)
    assert anon.get(public_name) == "a__b.c"
    assert hidden_name not in anon
    result = call(service, ANON, public_name)
    assert not result.is_error
    assert result.content[0].text == "public-a__b.c"
    hidden = call(service, ANON, hidden_name)
    assert hidden.is_error  # the hidden tool stays hidden, under its own name


def test_an_admin_sees_both_under_their_own_names(service: ToolService) -> None:
    names = listed(service, ADMIN)
    assert names[direct_name("a.b.c")] == "a.b.c"
    assert names[direct_name("a__b.c")] == "a__b.c"
    assert call(service, ADMIN, direct_name("a.b.c")).content[0].text == "hidden-a.b.c"
    assert call(service, ADMIN, direct_name("a__b.c")).content[0].text == "public-a__b.c"


def test_names_are_stable_whatever_else_the_catalog_holds() -> None:
    alone = direct_names(["a__b.c"])
    crowded = direct_names(["a__b.c", "a.b.c", "z.z", "a.b__c"])
    assert {k: n for n, k in alone.items()} == {"a__b.c": direct_name("a__b.c")}
    assert {k: n for n, k in crowded.items()}["a__b.c"] == direct_name("a__b.c")
    assert len(set(crowded)) == 4
    assert direct_name("pub.echo") == "pub__echo"
    assert direct_name("pub.stdin-json") == "pub__stdin-json"


def test_long_keys_stay_distinct_within_64_characters() -> None:
    keys = [f"g.{'x' * 70}{i}" for i in range(5)]
    names = direct_names(keys)
    assert len(names) == 5
    assert all(len(n) <= 64 for n in names)


def test_every_name_uses_only_the_characters_mcp_clients_accept() -> None:
    names = direct_names(["a.b.c", "a__b.c", "team.infra.re-start", "x." + "y" * 80])
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
    assert all(set(n) <= allowed and len(n) <= 64 for n in names)


def test_a_tool_of_a_catalog_swapped_in_before_the_door_heard_of_it_is_listed_and_callable(tmp_path: Path) -> None:
    """A reload swaps the service's catalog, then tells the MCP door (which re-indexes its direct names). A
    tools/list or tools/call between the two failed with an opaque error naming the new key (`MCPError(0,
    "'ops.two'")`, seen with two workers): the door now indexes again when it meets a key it has no name for."""
    home = tmp_path / "home"
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = write_catalog(
        tmp_path / "one", "version: 1\ntools:\n  - name: one\n    group: ops\n    public: true\n    exec: printf one\n"
    )
    service = ToolService.from_paths([str(first)], Settings.load(environ={"TOOLRUN_HOME": str(home)}))
    door = McpDoor(service, lambda ctx: ANON, direct=True)
    second = write_catalog(
        tmp_path / "two",
        "version: 1\ntools:\n  - name: one\n    group: ops\n    public: true\n    exec: printf one\n"
        "  - name: two\n    group: ops\n    public: true\n    exec: printf two\n",
    )
    service.swap(
        ToolService.from_paths([str(second)], Settings.load(environ={"TOOLRUN_HOME": str(home)})).state.catalog
    )

    async def main() -> tuple[list[str], Any]:
        async with Client(build_server(door)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, await client.call_tool(direct_name("ops.two"), {})

    names, result = anyio.run(main)
    assert direct_name("ops.two") in names
    assert result.is_error is False and result.content[0].text == "two"
