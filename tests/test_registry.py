"""Registry: tools by key, access by group tags, ranked and paginated search."""

from __future__ import annotations

import pytest

from toolrun.errors import NotFound
from toolrun.models import EXEC_RETURN_TYPE, Identity, Param, ToolSpec
from toolrun.registry import Registry
from toolrun.search.textsearch import words

ADMIN = Identity(username="root", groups=frozenset({"admin"}), anonymous=False)
SRE = Identity(username="sam", groups=frozenset({"sre"}), anonymous=False)
ANON = Identity()


def tool(
    key: str, description: str = "", groups: tuple[str, ...] = (), public: bool = False, params: tuple[str, ...] = ()
) -> ToolSpec:
    group, name = key.rsplit(".", 1)
    return ToolSpec(
        key=key,
        name=name,
        kind="exec",
        groups=(group, *groups),
        public=public,
        description=description,
        params=tuple(Param(p, "str", True) for p in params),
        return_type=EXEC_RETURN_TYPE,
        example=f"{key}()",
        source="true",
    )


@pytest.fixture()
def registry() -> Registry:
    return Registry(
        [
            tool("ops.restart", "Restart a service.", groups=("sre",), params=("service",)),
            tool("ops.disk_usage", "Report disk usage of a path.", public=True, params=("path",)),
            tool("web.http_get", "Fetch a URL over HTTP.", public=True, params=("url",)),
            tool("db.backup", "Back up the database to disk.", groups=("dba",)),
            tool("files.list_dir", "List the files of a directory.", groups=("sre",), params=("path",)),
        ]
    )


def test_tools_are_kept_sorted_by_key(registry: Registry) -> None:
    assert list(registry.tools) == sorted(registry.tools)
    assert len(registry) == 5


def test_an_anonymous_caller_sees_public_tools_only(registry: Registry) -> None:
    assert [t.key for t in registry.visible(ANON)] == ["ops.disk_usage", "web.http_get"]


def test_a_caller_sees_public_tools_and_tools_of_their_groups(registry: Registry) -> None:
    assert [t.key for t in registry.visible(SRE)] == ["files.list_dir", "ops.disk_usage", "ops.restart", "web.http_get"]


def test_the_admin_group_sees_everything(registry: Registry) -> None:
    assert len(registry.visible(ADMIN)) == 5


def test_an_unknown_and_a_hidden_key_raise_the_same_not_found(registry: Registry) -> None:
    with pytest.raises(NotFound) as hidden:
        registry.get(ANON, "ops.restart")
    with pytest.raises(NotFound) as unknown:
        registry.get(ANON, "ops.nope")
    assert str(hidden.value) == "no tool 'ops.restart'"
    assert str(unknown.value) == "no tool 'ops.nope'"


def test_not_found_suggests_only_keys_the_caller_may_see(registry: Registry) -> None:
    with pytest.raises(NotFound) as caught:
        registry.get(ANON, "ops.restar")
    assert caught.value.suggestions == []
    with pytest.raises(NotFound) as caught:
        registry.get(SRE, "ops.restar")
    assert caught.value.suggestions == ["ops.restart"]


def test_words_split_on_punctuation_and_lowercase_them() -> None:
    assert words("ops.Disk_usage HTTP-get") == ["ops", "disk", "usage", "http", "get"]


def test_search_ranks_name_matches_above_description_matches(registry: Registry) -> None:
    page = registry.search(ADMIN, "disk")
    assert [t.key for t in page.items] == ["ops.disk_usage", "db.backup"]


def test_search_requires_every_term_and_treats_the_last_as_a_prefix(registry: Registry) -> None:
    assert [t.key for t in registry.search(ADMIN, "list dir").items] == ["files.list_dir"]
    assert [t.key for t in registry.search(ADMIN, "rest").items] == ["ops.restart"]


def test_search_falls_back_to_any_term_when_no_tool_has_all(registry: Registry) -> None:
    keys = [t.key for t in registry.search(ADMIN, "restart url").items]
    assert sorted(keys) == ["ops.restart", "web.http_get"]


def test_search_only_returns_tools_the_caller_may_see(registry: Registry) -> None:
    assert registry.search(ANON, "restart").items == []
    assert registry.search(ANON, "restart").total == 0


def test_a_blank_query_pages_through_visible_tools_by_key(registry: Registry) -> None:
    first = registry.search(SRE, "  ", offset=0, limit=3)
    assert [t.key for t in first.items] == ["files.list_dir", "ops.disk_usage", "ops.restart"]
    assert (first.total, first.has_more, first.next_offset) == (4, True, 3)
    last = registry.search(SRE, "", offset=3, limit=3)
    assert [t.key for t in last.items] == ["web.http_get"]
    assert (last.has_more, last.next_offset) == (False, None)


def test_search_never_fails_on_odd_input(registry: Registry) -> None:
    for query in ['disk"', "*", "(", "AND OR NOT", "\x00", "é" * 1000, " ".join(["x"] * 100)]:
        page = registry.search(ADMIN, query, offset=-5, limit=0)
        assert page.offset == 0 and page.limit == 1


def test_every_search_term_matches_word_prefixes_so_a_singular_finds_the_plural() -> None:
    disks = tool("ops.disk_report", description="Report the disks and their usage.")
    other = tool("ops.uptime", description="How long the machine has been up.")
    registry = Registry([disks, other])
    page = registry.search(Identity(groups=frozenset({"admin"}), anonymous=False), "disk usage")
    assert [t.key for t in page.items] == ["ops.disk_report"]


def test_search_matches_other_inflections_of_a_word(registry: Registry) -> None:
    assert [t.key for t in registry.search(ADMIN, "restarting services").items] == ["ops.restart"]
    assert [t.key for t in registry.search(ADMIN, "backups").items] == ["db.backup"]


def test_search_forgives_one_typo_in_a_word(registry: Registry) -> None:
    assert [t.key for t in registry.search(ADMIN, "restrat").items] == ["ops.restart"]
    assert registry.search(ADMIN, "dsik usage").items[0].key == "ops.disk_usage"


def test_a_query_phrased_as_a_task_drops_its_function_words(registry: Registry) -> None:
    assert [t.key for t in registry.search(ADMIN, "how do I restart the service?").items] == ["ops.restart"]


def test_search_knows_common_synonyms(registry: Registry) -> None:
    assert [t.key for t in registry.search(ADMIN, "reboot").items] == ["ops.restart"]
    assert registry.search(ADMIN, "show the files of a folder").items[0].key == "files.list_dir"


def near_duplicates() -> list[ToolSpec]:
    """Three tools generated from one template, and the one tool about the same thing written by hand."""
    made = [
        tool(f"mem.{verb}_swap_devices", f"{verb.capitalize()} the swap devices of memory.", params=("target",))
        for verb in ("list", "check", "export", "count")
    ]
    return [*made, tool("mem.usage", "Show memory and swap usage of the host.")]


def test_near_duplicate_tools_take_turns_so_a_different_tool_reaches_the_first_three() -> None:
    registry = Registry(near_duplicates())
    keys = [t.key for t in registry.search(ADMIN, "swap").items]
    # The template's tools score highest (the word is in their names), but after the best of them a
    # tool unlike those above comes next; every match is still listed.
    assert keys[0].endswith("_swap_devices")
    assert "mem.usage" in keys[:3]
    assert sorted(keys) == sorted(t.key for t in near_duplicates())
    many = [t.key for t in registry.search(ADMIN, "memory swap").items]
    assert many[0].endswith("_swap_devices") and "mem.usage" in many[:3]


def test_diversity_never_changes_the_first_result_or_the_total(registry: Registry) -> None:
    big = Registry(near_duplicates())
    for query in ("swap", "list swap devices", "memory"):
        page = big.search(ADMIN, query, 0, 2)
        assert page.total == len(big.search(ADMIN, query, 0, 50).items)
        assert page.items == big.search(ADMIN, query, 0, 50).items[:2]  # pages agree with each other
    assert big.search(ADMIN, "export swap devices").items[0].key == "mem.export_swap_devices"


def test_function_words_of_a_question_do_not_decide_the_ranking(registry: Registry) -> None:
    # "whether", "almost", "all", "if" say how someone asks, not what a tool does.
    assert registry.search(ADMIN, "check whether almost all of the disk is used").items[0].key == "ops.disk_usage"
    assert registry.search(ADMIN, "restart it if it is not up").items[0].key == "ops.restart"
