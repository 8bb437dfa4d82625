"""Search that never loses to its own parts and says how sure it is (issue 38): the fusion keeps a strong word match
whatever the semantic side says; each hit has a score from 0 to 1; `min_score` is a floor that `total` respects and
an empty answer means no good match; `explain` says why. Through the registry, a real `toolrun serve` (REST), the
SDK's MCP client over stdio, and the `toolrun search` command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from support.mcp import mcp_stdio, text_of
from support.servers import ToolrunServer, clean_env, toolrun_cli
from toolrun.catalog import LoadOptions, load
from toolrun.models import Identity
from toolrun.registry import Registry

ADMIN = Identity(username="root", groups=frozenset({"admin"}), anonymous=False)

# A 52-tool ops catalog as a new user writes one: short descriptions, a few near neighbours of nginx's restart.
OPS_TOOLS = [
    ("nginx", "restart", "Restart the nginx web server.", ["unit"]),
    ("nginx", "reload", "Reload the nginx configuration without dropping connections.", []),
    ("nginx", "test_config", "Check the nginx configuration files for syntax errors.", ["path"]),
    ("nginx", "access_log", "Show the last lines of the nginx access log.", ["lines"]),
    ("nginx", "error_log", "Show the last lines of the nginx error log.", ["lines"]),
    ("nginx", "upstreams", "List the upstream servers nginx proxies to and their health.", []),
    ("redis", "flush_cache", "Flush every key from the Redis cache.", ["db"]),
    ("redis", "info", "Show Redis server statistics: memory, clients, keyspace.", []),
    ("redis", "restart", "Restart the Redis server process.", []),
    ("redis", "slowlog", "Show the slowest recent Redis commands.", ["count"]),
    ("postgres", "restart", "Restart the PostgreSQL database server.", []),
    ("postgres", "vacuum", "Vacuum and analyze a PostgreSQL table.", ["table"]),
    ("postgres", "locks", "List the locks held in the PostgreSQL database and who waits on them.", []),
    ("postgres", "backup", "Dump a PostgreSQL database to a file.", ["database", "path"]),
    ("postgres", "connections", "Count open PostgreSQL connections by client.", []),
    ("docker", "restart_container", "Restart a Docker container by name.", ["name"]),
    ("docker", "logs", "Show a Docker container's logs.", ["name", "lines"]),
    ("docker", "prune", "Remove stopped containers, dangling images and unused networks.", []),
    ("docker", "ps", "List running Docker containers.", []),
    ("docker", "stats", "Show CPU and memory use of each running container.", []),
    ("systemd", "restart_unit", "Restart a systemd unit.", ["unit"]),
    ("systemd", "status", "Show whether a systemd unit is active and its last log lines.", ["unit"]),
    ("systemd", "failed", "List failed systemd units.", []),
    ("systemd", "enable", "Enable a systemd unit at boot.", ["unit"]),
    ("disk", "usage", "How much space each mounted filesystem uses.", []),
    ("disk", "largest_files", "Find the largest files under a directory.", ["path", "count"]),
    ("disk", "inodes", "Show inode use per filesystem.", []),
    ("logs", "tail", "Follow a log file as it grows.", ["path"]),
    ("logs", "rotate", "Rotate log files now.", []),
    ("logs", "search", "Search the journal for a pattern.", ["pattern", "since"]),
    ("net", "ping", "Check that a host answers ICMP echo.", ["host"]),
    ("net", "port_check", "Check that a TCP port is open on a host.", ["host", "port"]),
    ("net", "dns_lookup", "Resolve a host name to its addresses.", ["name"]),
    ("net", "traceroute", "Show the network path to a host.", ["host"]),
    ("certs", "expiry", "Show when a site's TLS certificate expires.", ["host"]),
    ("certs", "renew", "Renew the Let's Encrypt certificates due soon.", []),
    ("users", "add", "Create a Unix user account.", ["name"]),
    ("users", "lock", "Lock a user account so it cannot log in.", ["name"]),
    ("users", "sessions", "List who is logged in.", []),
    ("proc", "top", "List the processes using the most CPU.", ["count"]),
    ("proc", "kill", "Send a signal to a process by pid.", ["pid", "signal"]),
    ("mem", "usage", "Show memory and swap in use.", []),
    ("cron", "list", "List the cron jobs of a user.", ["user"]),
    ("cron", "run_now", "Run a cron job now.", ["job"]),
    ("k8s", "pods", "List the pods of a namespace and their status.", ["namespace"]),
    ("k8s", "rollout_restart", "Restart a Kubernetes deployment with a rolling update.", ["deployment"]),
    ("k8s", "scale", "Scale a deployment to a number of replicas.", ["deployment", "replicas"]),
    ("git", "pull", "Pull the latest commits of a repository.", ["path"]),
    ("git", "status", "Show the working tree status of a repository.", ["path"]),
    ("backup", "snapshot", "Take a restic snapshot of a directory.", ["path"]),
    ("backup", "restore", "Restore files from a restic snapshot.", ["snapshot", "target"]),
    ("firewall", "block_ip", "Block an IP address in the firewall.", ["address"]),
]


def ops_yaml() -> str:
    lines = ["version: 1", "tools:"]
    for group, name, description, params in OPS_TOOLS:
        lines += [f"  - name: {name}", f"    group: {group}", "    public: true"]
        lines.append(f"    description: {json.dumps(description)}")
        if params:
            lines.append("    params:")
            lines += [f"      - {{name: {p}, type: str, required: false, description: The {p}.}}" for p in params]
        lines.append("    exec: echo ok")
    return "\n".join(lines) + "\n"


def ops_registry(tmp_path: Path) -> Registry:
    path = tmp_path / "ops.yaml"
    path.write_text(ops_yaml(), encoding="utf-8")
    return Registry(load([str(path)], {}, LoadOptions()).tools.values())


def keys(page: Any) -> list[str]:
    return [t.key for t in page.items]


@pytest.fixture(scope="module")
def model() -> Any:
    from toolrun.search.embedder import LocalModel

    return LocalModel()


def test_the_catalog_has_52_tools(tmp_path: Path) -> None:
    assert len(ops_registry(tmp_path).tools) == 52


# -- the fusion -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["bounce nginx", "restart nginx", "bounce the nginx server"])
def test_a_strong_word_match_stays_in_the_first_three_with_semantic_on(tmp_path: Path, model: Any, query: str) -> None:
    from toolrun.search.semantic import Semantic

    reg = ops_registry(tmp_path)
    assert "nginx.restart" in keys(reg.search(ADMIN, query, 0, 3))  # by words alone (`bounce` is also `reload`)
    Semantic(model.embed, "test", tmp_path / "cache").prepare(reg, wait=True)
    page = reg.search(ADMIN, query, 0, 3, explain=True)
    assert page.explain is not None and "similarity" in page.explain[0]  # ranked with the semantic side
    assert "nginx.restart" in keys(page), (query, keys(page))


@pytest.mark.parametrize("query", ["restart nginx", "nginx restart"])
def test_every_word_as_itself_in_a_tools_name_puts_it_first(tmp_path: Path, model: Any, query: str) -> None:
    from toolrun.search.semantic import Semantic

    reg = ops_registry(tmp_path)
    assert keys(reg.search(ADMIN, query))[0] == "nginx.restart"  # not nginx.reload, its rarer synonym
    Semantic(model.embed, "test", tmp_path / "cache").prepare(reg, wait=True)
    assert keys(reg.search(ADMIN, query))[0] == "nginx.restart"


def test_bounce_the_web_server_finds_the_nginx_restart_with_semantic_on(tmp_path: Path, model: Any) -> None:
    from toolrun.search.semantic import Semantic

    reg = ops_registry(tmp_path)
    Semantic(model.embed, "test", tmp_path / "cache").prepare(reg, wait=True)
    assert "nginx.restart" in keys(reg.search(ADMIN, "bounce the web server", 0, 3))


def fused_order(reg: Registry, query: str, semantic_order: list[str], sims: list[float] | None = None) -> list[str]:
    """The fusion of the query's lexical ranking with a given semantic order and similarities (by default none stands
    out: each 0.01 below the one before; no model: `fuse` is pure)."""
    from toolrun.search.fusion import LEXICAL_HEAD, fuse
    from toolrun.search.relevance import Relevance
    from toolrun.search.textsearch import query_words

    index = reg.index(ADMIN)
    terms = index.split_compounds(tuple(query_words(query)))
    lexical, _ = index.rank(terms, LEXICAL_HEAD)
    near = [next(d for d, t in enumerate(index.tools) if t.key == key) for key in semantic_order]
    if sims is None:
        sims = [0.5 - 0.01 * i for i in range(len(near))]  # no tool stands out
    fused = fuse(lexical, near, [], sims, Relevance.of(index, terms))
    return [index.tools[d].key for d in fused.ranked]


SEMANTIC_ORDER = ["net.port_check", "systemd.status", "proc.top", "docker.ps", "k8s.pods"]


def test_one_known_word_among_unknown_ones_does_not_override_the_semantic_order(tmp_path: Path) -> None:
    # `failed` is the only word of the catalog here: its tool is a strong word match (the word in its name), but it
    # holds a small share of what was asked, so the semantic side's first two stay first (before: systemd.failed was
    # put second)
    reg = ops_registry(tmp_path)
    order = fused_order(reg, "zorbly quuxen failed frobnitz", SEMANTIC_ORDER)
    assert order[:2] == SEMANTIC_ORDER[:2], order[:5]
    assert order.index("systemd.failed") > 2


def test_a_strong_word_match_holding_most_of_the_query_stays_second_beside_an_unknown_word(tmp_path: Path) -> None:
    reg = ops_registry(tmp_path)
    order = fused_order(reg, "restart nginx zorbly", SEMANTIC_ORDER)
    assert order.index("nginx.restart") <= 1, order[:5]


def test_a_semantic_list_sure_of_its_head_brings_its_second_tool_into_the_first_three(tmp_path: Path) -> None:
    # every query word is some tool's word, so the words are trusted most; the semantic list puts logs.tail second
    # (lexically fifth). When its similarities fall away after its head (0.62 first, 0.50 fifth: spread 0.12 >=
    # fusion.SPREAD), it is trusted more and logs.tail reaches the first three; when they stay level it does not
    reg = ops_registry(tmp_path)
    semantic = ["nginx.access_log", "logs.tail", "backup.restore", "backup.snapshot", "certs.expiry", "certs.renew"]
    level = fused_order(reg, "show nginx log lines", semantic)
    sure = fused_order(reg, "show nginx log lines", semantic, [0.62, 0.60, 0.56, 0.54, 0.50, 0.48])
    assert level.index("logs.tail") > 2, level[:5]
    assert sure.index("logs.tail") <= 2, sure[:5]
    assert sure[0] == "nginx.access_log"  # the strong word match stays first


def test_when_the_words_say_nothing_the_semantic_order_is_kept(tmp_path: Path, model: Any) -> None:
    from toolrun.search.semantic import Semantic

    reg = ops_registry(tmp_path)
    Semantic(model.embed, "test", tmp_path / "cache").prepare(reg, wait=True)
    query = "zorbly quuxen"  # no word of any tool, nor a synonym, a typo or a prefix of one
    index = reg.index(ADMIN)
    ranker, vectors = reg.semantic.ready() or (None, None)
    assert isinstance(ranker, Semantic) and vectors is not None
    found = ranker.near(vectors, index, query)
    assert found is not None
    page = reg.search(ADMIN, query, 0, 10, min_score=0.0, explain=True)
    assert keys(page) == [index.tools[d].key for d in found[0][:10]]
    assert page.explain is not None and page.explain[0]["fusion"] == "semantic order"


# -- scores and the floor ---------------------------------------------------------------------------------------


def test_each_hit_has_a_score_and_every_word_as_itself_scores_one(tmp_path: Path) -> None:
    reg = ops_registry(tmp_path)
    page = reg.search(ADMIN, "restart nginx", 0, 10, min_score=0.0)
    assert page.scores is not None and len(page.scores) == len(page.items)
    assert page.items[0].key == "nginx.restart" and page.scores[0] == 1.0
    assert all(0.0 <= s <= 1.0 for s in page.scores)
    assert min(page.scores) < 0.6  # a tool holding one of the two words scores less


def test_min_score_is_a_floor_total_counts_only_what_clears_it(tmp_path: Path) -> None:
    reg = ops_registry(tmp_path)
    everything = reg.search(ADMIN, "restart nginx", 0, 100, min_score=0.0)
    strict = reg.search(ADMIN, "restart nginx", 0, 100, min_score=0.9)
    assert everything.scores is not None and strict.scores is not None
    assert strict.total == sum(1 for s in everything.scores if s >= 0.9) == len(strict.items) >= 1
    assert everything.total == len(everything.items) > strict.total
    assert all(s >= 0.9 for s in strict.scores)
    # pages of a floored answer add up to its total
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = reg.search(ADMIN, "show", offset, 3, min_score=0.5)
        seen += keys(page)
        offset = page.next_offset
    assert len(seen) == len(set(seen)) == reg.search(ADMIN, "show", 0, 3, min_score=0.5).total


def test_a_query_matching_nothing_well_answers_empty(tmp_path: Path) -> None:
    reg = ops_registry(tmp_path)
    page = reg.search(ADMIN, "zorbly quuxen")
    assert page.items == [] and page.total == 0


def test_explain_names_the_words_matched_and_how(tmp_path: Path) -> None:
    reg = ops_registry(tmp_path)
    page = reg.search(ADMIN, "bounce nginx", 0, 3, explain=True)
    assert page.explain is not None and page.scores is not None
    at = keys(page).index("nginx.restart")
    why = page.explain[at]
    assert {"word": "nginx", "matched": "nginx", "how": "itself", "factor": 1.0} in why["matched"]
    assert {"word": "bounce", "matched": "restart", "how": "synonym", "factor": 0.7} in why["matched"]
    assert why["score"] == page.scores[at] and 0.8 < why["lexical"] < 1.0  # a synonym counts at 0.7
    assert "similarity" not in why  # lexical search: no semantic side to tell of


# -- through REST, MCP and the CLI ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    base = tmp_path_factory.mktemp("scores")
    catalog = base / "ops.yaml"
    catalog.write_text(ops_yaml(), encoding="utf-8")
    proc = ToolrunServer(base, catalog).start()
    yield proc
    proc.stop()


def test_rest_search_answers_scores_a_floor_and_explain(server: ToolrunServer) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        page = client.get("/search", params={"q": "restart nginx"}).json()
        assert page["min_score"] == 0.2
        assert page["items"][0]["key"] == "nginx.restart" and page["items"][0]["score"] == 1.0
        assert all(item["score"] >= 0.2 for item in page["items"]) and "explain" not in page["items"][0]
        strict = client.get("/search", params={"q": "restart nginx", "min_score": "0.9"}).json()
        assert strict["total"] == len(strict["items"]) < page["total"]
        loose = client.get("/search", params={"q": "restart nginx", "min_score": "0"}).json()
        assert loose["total"] > page["total"]
        found = client.get("/search", params={"q": "bounce nginx", "explain": "1"}).json()["items"]
        why = next(item for item in found if item["key"] == "nginx.restart")
        assert {"word": "bounce", "matched": "restart", "how": "synonym", "factor": 0.7} in why["explain"]["matched"]
        assert client.get("/search", params={"q": "zorbly quuxen"}).json()["items"] == []
        for bad in ("1.5", "-0.1", "high", "nan"):
            answer = client.get("/search", params={"q": "nginx", "min_score": bad})
            assert answer.status_code == 400, bad
            assert "min_score" in answer.json()["error"] and "0 to 1" in answer.json()["error"]
        answer = client.get("/search", params={"q": "nginx", "explain": "yes"})
        assert answer.status_code == 400 and "explain" in answer.json()["error"]


def test_mcp_search_shows_scores_compactly_and_takes_min_score(tmp_path: Path) -> None:
    catalog = tmp_path / "ops.yaml"
    catalog.write_text(ops_yaml(), encoding="utf-8")
    env = {"SVC_SEARCH_SEMANTIC": "false"}

    async def main() -> None:
        async with mcp_stdio(tmp_path / "home", catalog=catalog, env=env) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "min_score" in tools["search"].input_schema["properties"]
            result = await client.call_tool("search", {"query": "restart nginx"})
            items = result.structured_content["items"]
            assert items[0]["key"] == "nginx.restart" and items[0]["score"] == 1.0
            lines = text_of(result).splitlines()
            assert lines[0].startswith("1.0 nginx.restart(") and len(lines[0]) <= 112
            assert lines[1][:3].startswith(".") and all(len(line) <= 112 for line in lines)
            strict = (await client.call_tool("search", {"query": "restart nginx", "min_score": 0.9})).structured_content
            assert strict["total"] == len(strict["items"]) < result.structured_content["total"]
            empty = await client.call_tool("search", {"query": "zorbly quuxen"})
            assert empty.structured_content["items"] == []
            assert text_of(empty).startswith("No good match: no tool scores 0.2 or more.")
            bad = await client.call_tool("search", {"query": "nginx", "min_score": 2})
            assert bad.is_error and "`min_score` must be a number from 0 to 1" in text_of(bad)

    anyio.run(main)


def test_the_cli_prints_scores_takes_min_score_and_explains(tmp_path: Path) -> None:
    catalog = tmp_path / "ops.yaml"
    catalog.write_text(ops_yaml(), encoding="utf-8")
    env = clean_env(tmp_path / "home")
    done = toolrun_cli("search", "-c", str(catalog), "bounce", "nginx", "--explain", env=env)
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert rows[0].split()[:2] == ["score", "key"]
    assert rows[1].split()[1] in ("nginx.restart", "nginx.reload") and 0.8 < float(rows[1].split()[0]) < 1
    assert "nginx.restart: words: bounce->restart (synonym), nginx; lexical" in done.stdout
    as_json = toolrun_cli("search", "-c", str(catalog), "restart", "nginx", "--min-score", "0.9", "--json", env=env)
    page = json.loads(as_json.stdout)
    assert page["min_score"] == 0.9 and page["total"] == len(page["items"]) >= 1
    assert all(item["score"] >= 0.9 for item in page["items"])
    empty = toolrun_cli("search", "-c", str(catalog), "zorbly", env=env)
    assert empty.returncode == 0 and "no good match (no tool scores 0.2 or more)" in empty.stderr
    bad = toolrun_cli("search", "-c", str(catalog), "nginx", "--min-score", "3", env=env)
    assert bad.returncode != 0 and "--min-score must be a number from 0 to 1" in bad.stderr
