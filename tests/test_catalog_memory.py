"""How a loaded catalog is kept in memory (issue 14): what it does to behaviour, never its figures.

The figures (RSS, PSS, USS per worker) are bench/workers.py's; these tests pin that the leaner
representation changes nothing a user sees: a load from YAML (compacted through a pickle round trip)
gives exactly the tools the loader built, cold and warm alike.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from support.app import servers
from support.catalogs import EXAMPLES, generate_catalog
from toolrun.catalog import LoadOptions, load
from toolrun.catalog.loader import load_file
from toolrun.errors import CatalogError
from toolrun.exec import render
from toolrun.models import Identity
from toolrun.registry import Registry
from toolrun.search import textsearch
from toolrun.service import ToolService

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/op", "LANG": "C.UTF-8"}

RICH = """\
version: 1
group: ops
defaults:
  timeout: 30
  env:
    LC_ALL: C.UTF-8
tools:
  - name: fetch
    title: Fetch a page
    read_only: true
    keywords: [download, http]
    curl: --max-time 5 -- {{ url | quote }}
    limits: {cpu: 2, memory: 64M}
    env:
      TOKEN: {value: s3cret, secret: true}
    params:
      - {name: url, type: str, pattern: "https?://.+", example: "http://127.0.0.1/"}
      - {name: level, type: int, default: 1, min: 0, max: 9}
      - {name: mode, type: str, default: fast, enum: [fast, slow]}
      - {name: password, type: str, required: false, secret: true}
    examples:
      - name: local
        args: {url: "http://127.0.0.1/"}
        expect: {exit_code: 0}
  - name: grep
    exec: grep -c {% if i %}-i{% endif %} -e {{ pattern | quote }} -- {{ files | quote }}
    params:
      - {name: pattern, type: str}
      - {name: files, type: list, example: [a, b]}
      - {name: i, type: bool, default: false}
"""


def test_a_load_from_yaml_gives_exactly_the_tools_the_loader_built(tmp_path: Path) -> None:
    (tmp_path / "rich.yaml").write_text(RICH)
    (tmp_path / "gen.yaml").write_text(generate_catalog(60))
    for path in [tmp_path / "rich.yaml", tmp_path / "gen.yaml", EXAMPLES / "tools.yaml"]:
        built = load_file(path, ENV, LoadOptions()).tools
        expected = {t.key: t for t in built}
        cold = load([path], ENV, LoadOptions())  # no cache: built from YAML, then compacted
        cached_cold = load([path], ENV, LoadOptions(cache_dir=tmp_path / "cache"))
        warm = load([path], ENV, LoadOptions(cache_dir=tmp_path / "cache"))
        assert cold.tools == cached_cold.tools == warm.tools == expected
        assert cold.warnings == cached_cold.warnings == warm.warnings
        assert [t.entry() for t in cold.tools.values()] == [expected[k].entry() for k in cold.tools]
    assert os.listdir(tmp_path / "cache")


# -- who sees what, without touching every tool ------------------------------------------------------


def test_each_view_lists_exactly_the_tools_its_caller_may_access(tmp_path: Path) -> None:
    text = generate_catalog(120).replace("    group: web\n", "    group: web\n    public: true\n")
    (tmp_path / "gen.yaml").write_text(text)
    tools = load([tmp_path / "gen.yaml"], ENV).tools
    registry = Registry(tools.values())
    assert any(t.public for t in tools.values())
    callers = [
        Identity(),  # anonymous: public tools only
        Identity(username="a", groups=frozenset({"ops"}), anonymous=False),
        Identity(username="b", groups=frozenset({"db", "team-3", "nosuchgroup"}), anonymous=False),
        Identity(username="c", groups=frozenset({"nosuchgroup"}), anonymous=False),
        Identity(username="d", groups=frozenset({"admin"}), anonymous=False),
    ]
    for identity in callers:
        expected = [t for t in sorted(tools.values(), key=lambda t: t.key) if identity.can_access(t)]
        assert registry.visible(identity) == expected
        assert registry.search(identity, "", 0, 1000).items == expected
        found = registry.search(identity, "disks", 0, 1000).items
        assert found and all(identity.can_access(t) for t in found)


# -- entries served as stored bytes ---------------------------------------------------------------------


def test_the_listing_and_each_entry_are_the_tool_entries_and_follow_a_reload(tmp_path: Path) -> None:
    with servers(tmp_path) as make:
        server = make()
        admin = {"X-API-Key": server.key("root", ["admin"])}
        service = server.parts.service
        listing = server.client.get("/tools", headers=admin)
        assert listing.status_code == 200
        assert listing.headers["content-type"] == "application/json"
        assert listing.json() == [t.entry() for t in service.list(Identity.operator())]
        page = server.client.get("/tools", params={"limit": 2, "offset": 1}, headers=admin)
        assert page.json() == listing.json()[1:3]
        echo_tool = service.lookup("pub.echo")
        assert echo_tool is not None
        assert server.client.get("/tools/pub.echo").json() == echo_tool.entry()

        catalog = Path(service.catalog.files[0])
        catalog.write_text(catalog.read_text().replace("Print a message back.", "Say it again."))
        service.swap(load([catalog], ENV))
        assert server.client.get("/tools/pub.echo").json()["description"] == "Say it again."
        echo = [e for e in server.client.get("/tools", headers=admin).json() if e["key"] == "pub.echo"]
        assert echo[0]["description"] == "Say it again."


# -- templates compiled on first call, a bounded number kept ----------------------------------------------

TEMPLATES = """\
version: 1
group: t
tools:
""" + "".join(
    f"""  - name: say{i}
    public: true
    exec: printf '%s' {{% if loud %}}LOUD-{i}-{{% endif %}}{{{{ msg | quote }}}}
    params:
      - {{name: msg, type: str}}
      - {{name: loud, type: bool, default: false}}
"""
    for i in range(4)
)


def test_a_template_compiled_on_its_first_call_renders_the_same_every_call_even_after_it_was_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "t.yaml").write_text(TEMPLATES)
    service = ToolService(load([tmp_path / "t.yaml"], ENV))
    sources = [t.source for t in service.catalog.tools.values()]
    assert not any(source in render._COMPILED for source in sources)  # a load compiles nothing
    monkeypatch.setattr(render, "COMPILED_MAX", 2)
    anyone = Identity()
    for _ in range(3):  # four templates through a cache of two: each one is dropped and compiled again
        for i in range(4):
            loud = asyncio.run(service.call(anyone, f"t.say{i}", {"msg": "a b", "loud": True}))
            quiet = asyncio.run(service.call(anyone, f"t.say{i}", {"msg": "it's"}))
            assert (loud.value, quiet.value) == (f"LOUD-{i}-a b", "it's")
            assert len([s for s in sources if s in render._COMPILED]) <= 2


def test_a_template_error_is_still_reported_at_load_with_its_line(tmp_path: Path) -> None:
    bad = TEMPLATES.replace("{% if loud %}LOUD-2-{% endif %}", "{% if loud %}LOUD-2-{% endfor %}")
    (tmp_path / "t.yaml").write_text(bad)
    with pytest.raises(CatalogError) as caught:
        load([tmp_path / "t.yaml"], ENV)
    [problem] = caught.value.problems
    line = next(n for n, text in enumerate(bad.splitlines(), 1) if "LOUD-2" in text)
    assert (problem.file, problem.line, problem.key) == (str(tmp_path / "t.yaml"), line, "t.say2")
    assert "template error in exec" in problem.message and "endfor" in problem.message


def test_values_repeated_across_tools_keep_their_exact_types(tmp_path: Path) -> None:
    tools = "".join(
        f"""  - name: t{i}
    groups: [shared, "1"]
    keywords: [one, "1"]
    description: Same words.
    exec: printf '%s %s %s %s' {{{{ a }}}} {{{{ b }}}} {{{{ c }}}} {{{{ d }}}}
    params:
      - {{name: a, type: {kind}, default: {value}, description: Same words.}}
      - {{name: b, type: str, default: "1", enum: ["1", "True"]}}
      - {{name: c, type: list, default: [1, true, "1"]}}
      - {{name: d, type: float, default: 1, min: 0, max: 1}}
"""
        for i, (kind, value) in enumerate([("bool", "true"), ("int", "1"), ("float", "1.0"), ("str", '"1"')] * 2)
    )
    (tmp_path / "t.yaml").write_text(f"version: 1\ngroup: g\ntools:\n{tools}")
    for options in (LoadOptions(), LoadOptions(cache_dir=tmp_path / "c"), LoadOptions(cache_dir=tmp_path / "c")):
        loaded = load([tmp_path / "t.yaml"], ENV, options).tools
        for i, expected in enumerate([True, 1, 1.0, "1"] * 2):
            a, b, c, d = loaded[f"g.t{i}"].params
            assert type(a.default) is type(expected) and a.default == expected
            assert (b.default, b.enum, c.default) == ("1", ("1", "True"), [1, True, "1"])
            assert [type(v) for v in c.default] == [int, bool, str]
            assert (type(d.default), d.default) == (float, 1.0)
            assert loaded[f"g.t{i}"].groups == ("g", "shared", "1")
        assert loaded["g.t0"].params[0].description is loaded["g.t4"].params[0].description  # one object


def test_search_ranks_the_same_whether_postings_are_kept_unpacked_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gen.yaml").write_text(generate_catalog(300))
    tools = list(load([tmp_path / "gen.yaml"], ENV).tools.values())
    queries = [["disks"], ["list", "hosts"], ["chek"], ["sh"], ["fetch", "certs", "number"], ["directory"]]
    roomy = textsearch.Index(tools, [textsearch.analyze(t) for t in tools])
    expected = [([t.key for t in page], total) for page, total in (roomy.top(q, 0, 20) for q in queries)]
    assert all(total for _, total in expected)
    monkeypatch.setattr(textsearch, "UNPACKED_POSTINGS", 1)  # every stem unpacked again on each use
    tight = textsearch.Index(tools, [textsearch.analyze(t) for t in tools])
    for _ in range(2):
        assert [([t.key for t in page], total) for page, total in (tight.top(q, 0, 20) for q in queries)] == expected
        tight._cache.clear()
        tight._sorted.clear()
