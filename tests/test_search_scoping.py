"""Search never reveals hidden tools: adding tools a caller cannot see changes none of its pages.

A property test over random catalogs, through the app `toolrun serve` runs: `GET /search` and
the MCP `search` tool (over `/mcp`, 2026-07-28 requests), for an anonymous caller and for a
caller of group `g1`. Ranking statistics (document counts, word frequencies, lengths), the
prefix, typo and compound expansions, weak words and the all-words/any-word choice must all come from
visible tools.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from support.app import Server, servers
from toolrun.models import EXEC_RETURN_TYPE, Param, ToolSpec
from toolrun.registry import Registry

WORDS = ["disk", "disks", "usage", "restart", "service", "zz", "zzb", "zzc", "log", "logs", "nginx", "dns", "slow"]
WORDS.append("see")  # a weak word: it counts less only while another word matches a visible tool
QUERIES = ["zz", "disk usage", "restart servce", "logs", "zzb nginx dns", "di"]
QUERIES += ["diskusage", "lgo nginx", "see slow logs"]  # a joined word, a three-letter swap, a weak word
WORDS += ["cash", "funds"]  # words related to `money` (the related-words table), which no tool has
QUERIES.append("money")
MCP_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "search",
}


def spec(key: str, words: list[str], params: list[str], public: bool, groups: tuple[str, ...]) -> ToolSpec:
    group, name = key.rsplit(".", 1)
    return ToolSpec(
        key=key,
        name=name,
        kind="exec",
        groups=(group, *groups),
        public=public,
        description=" ".join(words),
        params=tuple(Param(p, "str", False) for p in params),
        return_type=EXEC_RETURN_TYPE,
        example=f"{key}()",
        source="true",
    )


@st.composite
def tools(draw: st.DrawFn, prefix: str, visible: bool) -> list[ToolSpec]:
    """Tools named `<prefix>N`: visible ones are public or of group g1; hidden ones are of g2 only."""
    out = []
    for i in range(draw(st.integers(0 if not visible else 1, 6))):
        words = draw(st.lists(st.sampled_from(WORDS), max_size=8))
        if not visible and draw(st.booleans()):  # a tool with many words of one prefix
            words += [f"zz{n:03d}" for n in range(draw(st.integers(0, 260)))]
        params = draw(st.lists(st.sampled_from(["path", "service", "zzp"]), max_size=2, unique=True))
        if visible:
            public = draw(st.booleans())
            groups: tuple[str, ...] = () if public else ("g1",)
        else:
            public, groups = False, ("g2",)
        out.append(spec(f"{draw(st.sampled_from(['ops', 'web', 'db']))}.{prefix}{i}", words, params, public, groups))
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with servers(tmp_path_factory.mktemp("scoping")) as make:
        yield make()


@pytest.fixture(scope="module")
def g1_key(server: Server) -> str:
    return server.key("gina", ["g1"])


def pages(server: Server, headers: dict[str, str]) -> list[Any]:
    """Every answer the caller gets for the queries: HTTP pages (full and paged) and MCP pages."""
    answers: list[Any] = []
    for query in QUERIES:
        params: dict[str, Any] = {"q": query, "limit": 100}
        if query == "disk usage":  # one page in the middle too
            params.update(limit=2, offset=1)
        response = server.client.get("/search", params=params, headers=headers)
        assert response.status_code == 200
        answers.append(response.json())
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "search",
                "arguments": {"query": query, "limit": 100},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        response = server.client.post("/mcp", content=json.dumps(body), headers={**MCP_HEADERS, **headers})
        assert response.status_code == 200, response.text
        text = response.text
        if text.startswith("event:") or text.startswith("data:"):
            text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
        result = json.loads(text)["result"]
        answers.append((result["structuredContent"], result["content"]))
    return answers


def swap(server: Server, catalog: list[ToolSpec]) -> None:
    server.parts.service.state.registry = Registry(catalog)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(visible=tools("v", visible=True), hidden=tools("h", visible=False))
@example(
    # The issue's case: 300 hidden words starting with `zz` pushed the visible tool's `zzb` out of
    # the bounded prefix expansion, so `q=zz` went from 1 hit to 0.
    visible=[spec("ops.v0", ["zzb"], [], True, ())],
    hidden=[spec("ops.h0", [f"zz{n:03d}" for n in range(300)], [], False, ("g2",))],
)
@example(
    # Document frequency: `disk` is rare among visible tools and common among hidden ones.
    visible=[
        spec("ops.v0", ["disk", "log", "log", "log"], [], True, ()),
        spec("ops.v1", ["disk", "disk", "usage"], [], True, ()),
        spec("ops.v2", ["usage", "log"], [], True, ()),
    ],
    hidden=[spec(f"ops.h{i}", ["disk"], [], False, ("g2",)) for i in range(8)],
)
@example(
    # Related words: `money` finds `funds` in a visible tool; hidden tools full of `cash` (as near) change nothing.
    visible=[spec("ops.v0", ["funds", "log"], [], True, ()), spec("ops.v1", ["log"], [], True, ())],
    hidden=[spec(f"ops.h{i}", ["cash", "cash"], [], False, ("g2",)) for i in range(3)],
)
def test_adding_hidden_tools_never_changes_an_anonymous_or_group_search_page(
    server: Server, g1_key: str, visible: list[ToolSpec], hidden: list[ToolSpec]
) -> None:
    callers = {"anonymous": {}, "g1": {"X-API-Key": g1_key}}
    for name, headers in callers.items():
        swap(server, visible)
        before = pages(server, headers)
        swap(server, visible + hidden)
        after = pages(server, headers)
        assert after == before, f"{name}: hidden tools changed a search page"


def test_the_issue_case_zz_finds_the_visible_tool_with_300_hidden_zz_words(server: Server) -> None:
    visible = [spec("ops.v0", ["zzb"], [], True, ())]
    hidden = [spec("ops.h0", [f"zz{n:03d}" for n in range(300)], [], False, ("g2",))]
    swap(server, visible + hidden)
    page = server.client.get("/search", params={"q": "zz"}).json()
    assert [i["key"] for i in page["items"]] == ["ops.v0"]
    assert page["total"] == 1


def test_each_view_indexes_only_its_own_tools(tmp_path: Path) -> None:
    from toolrun.models import Identity

    registry = Registry([spec("ops.pub", ["disk"], [], True, ()), spec("ops.sec", ["disk"], [], False, ("g2",))])
    anon, g2 = Identity(), Identity("u", groups=frozenset({"g2", "unrelated"}), anonymous=False)
    assert [t.key for t in registry.index(anon).tools] == ["ops.pub"]
    assert [t.key for t in registry.index(g2).tools] == ["ops.pub", "ops.sec"]
    # Groups the catalog never names do not make a new view.
    assert registry.view_key(Identity("v", groups=frozenset({"unrelated"}), anonymous=False)) == registry.view_key(anon)
