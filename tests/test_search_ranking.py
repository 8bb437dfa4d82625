"""Lexical ranking: no rule hides a better match; typos, abbreviations, filler words and `name=value` queries."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolrun.models import EXEC_RETURN_TYPE, Identity, Param, ToolSpec
from toolrun.registry import Registry
from toolrun.textsearch import query_words

ADMIN = Identity(username="root", groups=frozenset({"admin"}), anonymous=False)


def tool(key: str, description: str, params: tuple[str, ...] = ()) -> ToolSpec:
    group, name = key.rsplit(".", 1)
    return ToolSpec(
        key=key,
        name=name,
        kind="exec",
        groups=(group,),
        public=True,
        description=description,
        params=tuple(Param(p, "str", False) for p in params),
        return_type=EXEC_RETURN_TYPE,
        example=f"{key}()",
        source="true",
    )


CATALOG = [
    tool("restic.forget", "Forget old restic snapshots by policy and list what was removed.", ("policy",)),
    tool("restic.snapshots", "Print the snapshots of a restic repository.", ("repository",)),
    tool("restic.check", "Verify the integrity of a restic repository.", ("repository",)),
    tool("systemd.restart", "Restart a systemd unit.", ("unit",)),
    *(tool(f"nginx.{n}", f"Show the nginx {n.replace('_', ' ')}.") for n in ("upstreams", "vhosts", "error_log")),
    tool("disk.usage", "How much space a directory tree takes.", ("path",)),
    tool("mem.usage", "Memory and swap in use.", ()),
    tool("media.resize_images", "Resize a batch of images.", ("folder", "width")),
    tool("media.transcode", "Convert a video to another codec.", ("input",)),
    tool("helm.rollback", "Roll a release back.", ("release", "to_revision")),
    tool("git.show", "Show one commit.", ("commit",)),
    *(tool(f"inventory.{n}", f"List the {n} of the inventory.") for n in ("hosts", "racks", "switches", "disks")),
]


def keys(query: str, limit: int = 3) -> list[str]:
    return [t.key for t in Registry(CATALOG).search(ADMIN, query, 0, limit).items]


def test_a_tool_matching_every_word_does_not_hide_a_better_match() -> None:
    # restic.forget has all three words ("list" in its description: a common word here); the tool the query names
    # has the two rare ones in its key and name: it ranks first, and the other one is still on the page (tools
    # matching every word used to come first and alone)
    found = keys("restic snapshots list")
    assert found[:2] == ["restic.snapshots", "restic.forget"]


def test_a_typo_is_corrected_even_when_the_other_words_match_tools() -> None:
    assert keys("restrat nginx")[0] == "systemd.restart"
    assert keys("dsk usage")[0] == "disk.usage"


def test_an_abbreviation_finds_the_word_it_shortens() -> None:
    assert keys("resize imgs")[0] == "media.resize_images"
    assert keys("imgs")[0] == "media.resize_images"


def test_filler_words_that_ask_for_a_tool_are_dropped() -> None:
    assert query_words("call the tool to restart a unit") == ["restart", "unit"]
    assert query_words("use invoke") == ["use", "invoke"]  # nothing else left: they are searched for
    assert keys("call the restart tool")[0] == "systemd.restart"


def test_a_name_value_query_searches_for_the_param_name() -> None:
    assert query_words("to_revision=3 release=web") == ["revision", "release"]
    assert keys("to_revision=3")[0] == "helm.rollback"
    assert keys("to_revision=3 release=web")[0] == "helm.rollback"


def test_the_held_out_scorer_refuses_a_paraphrase_sharing_a_word_with_its_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = Path(__file__).resolve().parent.parent / "bench"
    monkeypatch.syspath_prepend(str(bench))
    import search_eval as se

    assert se.paraphrase_overlaps() == []  # the shipped set is clean
    assert len(se.heldout_queries()) == 5 * len(se.heldout.INTENTS)
    group, name, desc, params, asked, also = se.heldout.INTENTS[0]
    leaky = (group, name, desc, params, {**asked, "paraphrase": "emails for colleagues"}, also)  # "email" stems
    monkeypatch.setattr(se.heldout, "INTENTS", [leaky, *se.heldout.INTENTS[1:]])
    with pytest.raises(SystemExit, match=r"mail.send_message: 'emails for colleagues' shares \['email'\]"):
        se.heldout_queries()
