"""Lexical ranking: no rule hides a better match; typos, abbreviations, filler words and `name=value` queries."""

from __future__ import annotations

from toolrun.models import EXEC_RETURN_TYPE, Identity, Param, ToolSpec
from toolrun.registry import Registry
from toolrun.search.textsearch import query_words

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


def test_a_quoted_value_with_spaces_is_not_searched() -> None:
    assert query_words("release='nginx restart web' to_revision=3") == ["release", "revision"]
    assert query_words('release="nginx restart" to_revision=3') == ["release", "revision"]
    assert keys("release='restart the nginx unit' to_revision=3")[0] == "helm.rollback"


def page(catalog: list[ToolSpec], query: str, limit: int = 3) -> list[str]:
    return [t.key for t in Registry(catalog).search(ADMIN, query, 0, limit).items]


def test_a_compound_written_together_finds_the_tool_with_its_two_words() -> None:
    catalog = [
        tool("net.port_check", "Test whether a TCP port on a host accepts connections.", ("host", "port")),
        tool("net.ping", "Check that a host answers ICMP echo.", ("host",)),
        tool("pg.table_sizes", "List PostgreSQL tables by size.", ("database",)),
        tool("pg.slow_queries", "Show the slowest queries.", ("database",)),
    ]
    assert page(catalog, "portcheck")[0] == "net.port_check"
    assert page(catalog, "tablesizes postgresql")[0] == "pg.table_sizes"
    # a word some tool has is never split (`database` stays one word, not data + base)
    assert page(catalog, "database") == ["pg.slow_queries", "pg.table_sizes"]
    assert page(catalog, "portchek") == []  # nothing splits into two words of the tools, and no typo is that far
    assert page(catalog, "hostthat") == []  # a function word is no part: not host + that


def test_a_three_letter_word_with_two_letters_swapped_is_corrected() -> None:
    catalog = [
        tool("git.log", "Show the recent commits of a repository.", ("repo",)),
        tool("git.blame", "Blame a file.", ()),
        tool("ssh.keys", "List keys.", ()),
        tool("ssh.run", "Run a command on a remote host.", ("host",)),
        tool("files.cat", "Print a file.", ("path",)),
    ]
    assert page(catalog, "git lgo")[0] == "git.log"
    assert page(catalog, "ssh rnu")[0] == "ssh.run"
    # other edits of a three-letter word reach too many words: `cut` is not taken for `cat`
    assert page(catalog, "cut") == []
    assert page(catalog, "teh") == []  # nor a function word (`the`, in every description) for its swap


def test_words_of_asking_count_less_and_bring_in_no_tool_alone() -> None:
    catalog = [
        tool("ssh.run", "Run a command on a remote host over SSH.", ("host", "command")),
        tool("backup.run", "Run the nightly backup job now.", ()),
        tool("systemd.status", "Show whether a service such as nginx is active, with its main pid.", ("unit",)),
        tool("nginx.reload", "Test the nginx configuration and reload it.", ()),
    ]
    # `running` would put the tools named run first; the question is about nginx's state
    found = page(catalog, "is nginx running right now", 4)
    assert found == ["nginx.reload", "systemd.status"]  # run tools are not brought in by `running` alone
    # alone, or beside words no tool has, they still find the tools they name
    assert page(catalog, "run") == ["backup.run", "ssh.run"]
    assert page(catalog, "run uptime") == ["backup.run", "ssh.run"]
    # beside another word, they still add to the score of a tool that has both
    assert page(catalog, "run remote command")[0] == "ssh.run"


def test_a_compound_splits_only_into_words_of_tools_the_caller_may_see() -> None:
    from dataclasses import replace

    from toolrun.models import Identity

    hidden = replace(tool("net.port_scan", "Scan the ports of a host."), public=False, groups=("net", "g2"))
    registry = Registry([tool("net.check_host", "Check a host."), hidden])
    assert [t.key for t in registry.search(ADMIN, "portcheck", 0, 5).items] == ["net.check_host", "net.port_scan"]
    # `port` is only in a tool the anonymous caller cannot see: the word is not split, so nothing matches
    anonymous = registry.search(Identity(), "portcheck", 0, 5)
    assert (anonymous.items, anonymous.total) == ([], 0)


FINANCE = [
    tool("billing.payout", "Send cash to a supplier's bank account.", ("supplier", "amount")),
    tool("billing.invoices", "List the invoices of a customer.", ("customer",)),
    tool("media.images", "Resize the images of a gallery.", ("gallery",)),
    tool("media.photos", "Export the photos of an album.", ("album",)),
    tool("net.ping", "Check that a host answers ICMP echo.", ("host",)),
]


def test_a_word_no_tool_has_finds_the_tools_with_a_related_word() -> None:
    from toolrun.search.textsearch import related_words

    assert ("cash", 0.71) in [(s, round(f, 2)) for s, f in related_words("monei")]  # the shipped table: money ~ cash
    # no tool says `money`: the tool that sends cash is found through the related-words table
    assert page(FINANCE, "pay money to a supplier")[0] == "billing.payout"
    assert page(FINANCE, "money")[0] == "billing.payout"
    # picture ~ photo 0.85; picture = image in WordNet: both found, nothing else
    assert sorted(page(FINANCE, "pictures")) == ["media.images", "media.photos"]


def test_a_tool_with_the_word_itself_ranks_above_one_with_a_related_word() -> None:
    # photo ~ image (0.83): both tools are found, the one that says `photos` first
    assert page(FINANCE, "photos") == ["media.photos", "media.images"]
    assert page(FINANCE, "images") == ["media.images", "media.photos"]
    assert page(FINANCE, "resize images")[0] == "media.images"


def test_a_related_word_expands_only_into_words_of_tools_the_caller_may_see() -> None:
    from dataclasses import replace

    from toolrun.models import Identity

    hidden = replace(tool("bank.cash", "Withdraw cash."), public=False, groups=("bank", "g2"))
    visible = tool("net.ping", "Check that a host answers ICMP echo.", ("host",))
    assert [t.key for t in Registry([visible, hidden]).search(ADMIN, "money", 0, 5).items] == ["bank.cash"]
    # `cash` is only in a tool the anonymous caller cannot see: `money` finds nothing, as without that tool
    for catalog in ([visible], [visible, hidden]):
        anonymous = Registry(catalog).search(Identity(), "money", 0, 5)
        assert (anonymous.items, anonymous.total) == ([], 0)


def test_the_related_words_table_is_read_on_the_first_search_only() -> None:
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from toolrun.registry import Registry\n"
        "from toolrun.models import EXEC_RETURN_TYPE, Identity, ToolSpec\n"
        "t = ToolSpec(key='b.pay', name='pay', kind='exec', groups=('b',), public=True, description='Send cash.',\n"
        "             params=(), return_type=EXEC_RETURN_TYPE, example='b.pay()', source='true')\n"
        "r = Registry([t])\n"
        "print('toolrun.search.related' in sys.modules)\n"
        "print([x.key for x in r.search(Identity(), 'money').items], 'toolrun.search.related' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout == "False\n['b.pay'] True\n"


ENGLISH = [
    tool("notes.what_changed", "Show what changed in the notes since yesterday."),
    tool("slack.history", "List the messages of a conversation.", ("channel",)),
    tool("net.rate_limit", "Limit the bandwidth a host may use.", ("host", "kbps")),
    tool("net.speedtest", "Measure download speed to a mirror.", ("mirror",)),
    tool("net.ping", "Check that a host answers ICMP echo.", ("host",)),
    tool("weather.current", "Get the current forecast for a city.", ("city",)),
]


def test_an_english_word_no_tool_has_is_read_through_its_related_words_not_corrected_as_a_typo() -> None:
    # `chat` is one edit from `what` (a word of notes.what_changed): it used to be "corrected" into it and put the
    # notes first; a word of general English is another word, not a misspelling: chat ~ conversation, message
    assert page(ENGLISH, "chat logs") == ["slack.history"]
    # a misspelling that is no English word is still corrected
    assert page(ENGLISH, "bandwith limit")[0] == "net.rate_limit"


def test_a_word_no_tool_has_finds_its_wordnet_synonym() -> None:
    from toolrun.search.textsearch import related_words

    assert ("limit", 1.0) in related_words("throttl")  # WordNet 3.0: throttle = limit (a synonym, at 1.0)
    # no tool says `throttle`: the tool that limits bandwidth comes first, by words alone, above the tool that only
    # shares `host`
    assert page(ENGLISH, "throttle a host")[0] == "net.rate_limit"
    assert page(ENGLISH, "throttle")[0] == "net.rate_limit"
    assert page(ENGLISH, "fetch the weather")[0] == "weather.current"  # fetch = get, weather ~ forecast


def test_a_wordnet_synonym_does_not_move_a_word_the_catalog_has() -> None:
    # `host` is a tool's word: it finds the tools that say `host`, not WordNet's senses of it (`master`, `legion`)
    assert sorted(page(ENGLISH, "host")) == ["net.ping", "net.rate_limit"]


def test_explain_calls_a_related_match_of_a_word_no_tool_has_a_related_word() -> None:
    # it counts 0.69 (over an abbreviation's 0.6): explain still says what it is
    page = Registry(ENGLISH).search(ADMIN, "throttle a host", 0, 3, explain=True)
    assert page.explain is not None and page.items[0].key == "net.rate_limit"
    matched = page.explain[0]["matched"]
    assert {"word": "throttle", "matched": "limit", "how": "related word", "factor": 0.69} in matched


MAPS = [
    tool("maps.elevation", "Elevation of a point.", ("lat", "lng")),
    tool("maps.places", "Search places near a point.", ("query", "radius")),
    tool("maps.distance", "Distance between two points in metres.", ("origin", "destination")),
]


def test_a_word_no_tool_has_counts_its_related_words_above_a_weak_match_of_another_word() -> None:
    # no tool says `altitude` or `spot`: they lean on elevation and point (their related words, counted at 0.8 of
    # their similarity, at most 0.69); the elevation tool comes first by words alone, where it used to fall under the
    # floor behind the tool that only shares `metres`
    assert page(MAPS, "altitude of a spot in metres")[:2] == ["maps.elevation", "maps.distance"]
