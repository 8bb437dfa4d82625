"""The MCP door's logic, in-process: `Client(build_server(door))` over an McpDoor over a ToolService.

Fast tests of what an agent sees: the meta-tools and their schemas, `execute`/`search`/
`describe_tools`/`whoami` results, errors it can act on (never an opaque internal error),
scoping (a hidden tool looks like a missing one), sessions and direct mode. The real
transports are in test_mcp_stdio.py and test_mcp_http.py.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
import yaml
from mcp import Client

from support.catalogs import write_catalog
from support.mcp import ALL_KEYS, CATALOG, META_TOOLS, OPS_KEYS, PUBLIC_KEYS, text_of
from toolrun.cli.mcpconfig import find_toolrun, mcp_config_snippet
from toolrun.models import Identity
from toolrun.server.mcp.door import McpDoor, build_server, direct_name, param_schema
from toolrun.service import ToolService
from toolrun.settings import Settings
from toolrun.state.memory import MemoryLimiter, MemorySessions
from toolrun.telemetry.metrics import Metrics

ANON = Identity(client="10.0.0.7")
OLGA = Identity("olga", "olga@example.com", frozenset({"ops"}), anonymous=False)
ADA = Identity("ada", "ada@example.com", frozenset({"admin"}), anonymous=False)
ENTRY_FIELDS = ["description", "example", "groups", "key", "params", "return_type"]


def make_service(home: Path, limit: int | None = None) -> ToolService:
    settings = Settings.load(environ={"TOOLRUN_HOME": str(home)})
    return ToolService.from_paths(
        [str(CATALOG)],
        settings,
        limiter=MemoryLimiter(limit, 60.0) if limit else None,
        observer=Metrics(),
        sessions=MemorySessions(),
    )


@pytest.fixture
def service(_isolated_home: Path) -> ToolService:
    return make_service(_isolated_home)


def run(
    service: ToolService,
    identity: Identity,
    body: Callable[[Any], Awaitable[Any]],
    *,
    direct: bool = False,
    session: str | None = None,
    mode: str = "auto",
) -> Any:
    """Open an in-process SDK client on a door acting for `identity` and run `body(client)`."""
    door = McpDoor(service, lambda ctx: identity, direct=direct, stdio_session=session)

    async def main() -> Any:
        async with Client(build_server(door), mode=mode) as client:
            return await body(client)

    return anyio.run(main)


def call(service: ToolService, identity: Identity, name: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
    async def body(client: Any) -> Any:
        return await client.call_tool(name, arguments)

    return run(service, identity, body, **kwargs)


def execute(service: ToolService, identity: Identity, key: str, arguments: dict[str, Any] | None = None) -> Any:
    args: dict[str, Any] = {"key": key}
    if arguments is not None:
        args["arguments"] = arguments
    return call(service, identity, "execute", args)


# -- tools/list -----------------------------------------------------------------------------------


def test_tools_list_offers_the_four_meta_tools_each_with_a_description_and_an_object_input_schema(
    service: ToolService,
) -> None:
    async def body(client: Any) -> Any:
        return await client.list_tools()

    listed = run(service, ANON, body)
    tools = {t.name: t for t in listed.tools}
    assert list(tools) == META_TOOLS
    for tool in tools.values():
        assert len(tool.description) > 40
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
    assert tools["execute"].input_schema["required"] == ["key"]
    assert set(tools["execute"].input_schema["properties"]) == {"key", "arguments", "session"}
    assert tools["execute"].input_schema["properties"]["arguments"]["type"] == "object"
    assert set(tools["search"].input_schema["properties"]) == {"query", "offset", "limit", "min_score"}
    assert tools["describe_tools"].input_schema["required"] == ["keys"]
    assert tools["describe_tools"].input_schema["properties"]["keys"]["type"] == "array"
    assert tools["whoami"].input_schema["properties"] == {}


def test_a_handshake_era_in_process_client_gets_the_same_meta_tools(service: ToolService) -> None:
    async def body(client: Any) -> Any:
        return client.protocol_version, [t.name for t in (await client.list_tools()).tools]

    version, names = run(service, ANON, body, mode="legacy")
    assert version in ("2025-06-18", "2025-11-25")
    assert names == META_TOOLS


# -- execute ----------------------------------------------------------------------------------------


def test_execute_returns_a_tools_string_result_as_text_and_structured_content(service: ToolService) -> None:
    result = execute(service, ANON, "pub.echo", {"msg": "hello agent"})
    assert result.is_error is False
    assert text_of(result) == "hello agent"
    assert result.structured_content == {
        "key": "pub.echo",
        "ok": True,
        "returncode": 0,
        "stdout": "hello agent",
        "stderr": "",
        "timed_out": False,
    }


def test_execute_of_a_failing_exec_tool_is_a_normal_result_showing_returncode_stdout_and_stderr(
    service: ToolService,
) -> None:
    result = execute(service, ANON, "pub.fail")
    assert result.is_error is False
    assert text_of(result) == "(3, 'out', 'err')"
    assert isinstance(result.structured_content, dict)
    assert result.structured_content == {
        "key": "pub.fail",
        "ok": False,
        "returncode": 3,
        "stdout": "out",
        "stderr": "err",
        "timed_out": False,
    }


def test_execute_of_an_fn_tool_returning_a_dict_gives_json_text_and_the_value_under_result(
    service: ToolService,
) -> None:
    result = execute(service, OLGA, "pub.caller", {})
    assert result.is_error is False
    assert json.loads(text_of(result)) == {"username": "olga", "groups": ["ops"]}
    assert result.structured_content == {
        "key": "pub.caller",
        "ok": True,
        "result": {"username": "olga", "groups": ["ops"]},
    }


def test_execute_coerces_arguments_like_the_http_route(service: ToolService) -> None:
    assert text_of(execute(service, ANON, "pub.count", {"n": "42"})) == "42"


def test_execute_and_its_call_are_counted_once_in_the_metrics(service: ToolService) -> None:
    execute(service, ANON, "pub.echo", {"msg": "x"})
    assert isinstance(service.observer, Metrics)
    text = service.observer.render().decode()
    assert 'svc_tool_calls_total{outcome="ok",tool="pub.echo"} 1.0' in text


# -- search -----------------------------------------------------------------------------------------


def test_search_ranks_a_key_match_above_a_description_match(service: ToolService) -> None:
    result = call(service, ANON, "search", {"query": "echo"})
    assert result.is_error is False
    body = result.structured_content
    # The text is one line per tool, `score key(param: type ...) - summary`, then where the page is.
    assert text_of(result) == (
        "1.0 pub.echo(msg: str) - Print a message back.\n"
        "1.0 pub.count(n: int [0..100]) - Echo an integer between 0 and 100.\n"
        "[1-2 of 2]"
    )
    assert [item["key"] for item in body["items"]] == ["pub.echo", "pub.count"]
    assert body["items"][1] == {
        "key": "pub.count",
        "groups": ["pub", "public"],
        "summary": "Echo an integer between 0 and 100.",
        "example": "pub.count(n=0)",
        "score": 1.0,
    }


def test_search_finds_a_tool_by_words_of_its_description(service: ToolService) -> None:
    items = call(service, OLGA, "search", {"query": "restart service"}).structured_content["items"]
    assert [i["key"] for i in items] == ["ops.restart"]
    # a tool whose description says `server` (a word related to `service`) comes after it, under the default floor
    loose = call(service, OLGA, "search", {"query": "restart service", "min_score": 0}).structured_content["items"]
    assert [i["key"] for i in loose] == ["ops.restart", "pub.noisy"] and loose[1]["score"] < 0.2
    assert items[0]["summary"] == "Restart a service (ops only)."
    assert items[0]["example"].startswith("ops.restart(service=")


def test_search_is_scoped_to_the_callers_tools(service: ToolService) -> None:
    assert call(service, ANON, "search", {"query": "payroll"}).structured_content["items"] == []
    assert call(service, OLGA, "search", {"query": "payroll"}).structured_content["items"] == []
    found = call(service, ADA, "search", {"query": "payroll"}).structured_content["items"]
    assert [i["key"] for i in found] == ["finance.payroll"]


def test_search_with_an_empty_query_pages_through_every_tool_with_has_more_and_next_offset(
    service: ToolService,
) -> None:
    async def body(client: Any) -> Any:
        pages, offset = [], 0
        while offset is not None:
            page = (await client.call_tool("search", {"offset": offset, "limit": 4})).structured_content
            pages.append(page)
            offset = page["next_offset"]
        return pages

    pages = run(service, OLGA, body)
    assert len(OPS_KEYS) == 15
    assert [len(p["items"]) for p in pages] == [4, 4, 4, 3]
    assert [p["has_more"] for p in pages] == [True, True, True, False]
    assert [p["offset"] for p in pages] == [0, 4, 8, 12]
    assert [p["next_offset"] for p in pages] == [4, 8, 12, None]
    assert all(p["total"] == len(OPS_KEYS) for p in pages)
    assert [i["key"] for p in pages for i in p["items"]] == OPS_KEYS


def test_search_rejects_a_bad_limit_naming_it(service: ToolService) -> None:
    result = call(service, ANON, "search", {"query": "x", "limit": 1000})
    assert result.is_error is True
    assert "`limit`" in text_of(result)


# -- describe_tools -----------------------------------------------------------------------------------


def test_describe_tools_returns_spec_entries_for_the_given_keys(service: ToolService) -> None:
    body = call(service, OLGA, "describe_tools", {"keys": ["pub.count", "ops.restart"]}).structured_content
    assert body["not_found"] == []
    count, restart = body["tools"]
    assert sorted(count) == ENTRY_FIELDS
    assert count["key"] == "pub.count"
    assert count["return_type"] == "str | (int, str, str)"
    assert count["params"] == [
        {"name": "n", "type": "int", "required": True, "default": None, "description": "", "example": None}
        | {"min": 0, "max": 100}  # the declared constraints
    ]
    assert restart["key"] == "ops.restart"
    assert restart["groups"] == ["ops"]


def test_describe_tools_lists_hidden_and_unknown_keys_alike_under_not_found(service: ToolService) -> None:
    body = call(
        service, ANON, "describe_tools", {"keys": ["pub.echo", "ops.restart", "ops.nonexistent"]}
    ).structured_content
    assert [t["key"] for t in body["tools"]] == ["pub.echo"]
    assert body["not_found"] == ["ops.restart", "ops.nonexistent"]


# -- whoami -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("identity", "expected"),
    [
        (ANON, {"username": "", "email": "", "groups": [], "tools": PUBLIC_KEYS}),
        (OLGA, {"username": "olga", "email": "olga@example.com", "groups": ["ops"], "tools": OPS_KEYS}),
        (ADA, {"username": "ada", "email": "ada@example.com", "groups": ["admin"], "tools": ALL_KEYS}),
    ],
    ids=["anonymous", "grouped", "admin"],
)
def test_whoami_returns_the_identity_record_with_the_callers_tool_keys(
    service: ToolService, identity: Identity, expected: dict[str, Any]
) -> None:
    result = call(service, identity, "whoami", {})
    assert result.is_error is False
    assert result.structured_content == expected  # the fields of GET /whoami
    # The text an agent reads is short: who, groups, how many tools (search lists them).
    who = expected["username"] or "anonymous"
    if expected["email"]:
        who += f" <{expected['email']}>"
    groups = ", ".join(expected["groups"]) or "none"
    count = len(expected["tools"])
    tools = f"{count} tool" if count == 1 else f"{count} tools"
    assert text_of(result) == f"{who}; groups: {groups}; {tools} (list them with `search`)"


# -- errors an agent can act on -----------------------------------------------------------------------


def test_an_unknown_tool_key_is_an_error_result_with_a_did_you_mean(service: ToolService) -> None:
    result = execute(service, ANON, "pub.remembr", {"value": "x"})
    assert result.is_error is True
    text = text_of(result)
    assert text.startswith("No tool 'pub.remembr' is available to you. Did you mean pub.remember")
    assert text.endswith("? Use `search` to find tools.")
    assert result.structured_content["error"] == "NotFound"


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({}, "'n'"),
        ({"n": "many"}, "'n'"),
        ({"n": 101}, "'n'"),
        ({"n": 1, "m": 2}, "'m'"),
    ],
    ids=["missing", "wrong-type", "above-max", "unknown-param"],
)
def test_bad_arguments_are_an_error_result_naming_the_parameter(
    service: ToolService, arguments: dict[str, Any], named: str
) -> None:
    result = execute(service, ANON, "pub.count", arguments)
    assert result.is_error is True
    text = text_of(result)
    assert text.startswith("Invalid arguments: ")
    assert named in text
    # The answer carries the fix: the tool's signature with its constraints.
    assert text.endswith(". Call it as pub.count(n: int [0..100])")
    assert result.structured_content["error"] == "ParamError"


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({}, "`key`"),
        ({"key": 7}, "`key`"),
        ({"key": "pub.echo", "arguments": ["hi"]}, "`arguments`"),
        ({"key": "pub.echo", "arguments": []}, "`arguments`"),
        ({"key": "pub.remember", "arguments": {"value": "x"}, "session": 7}, "`session`"),
        ({"key": "pub.echo", "args": {"msg": "hi"}}, "'args'"),
    ],
    ids=[
        "no-key",
        "key-not-a-string",
        "arguments-not-an-object",
        "arguments-empty-list",
        "session-not-a-string",
        "unknown-field",
    ],
)
def test_a_malformed_execute_call_is_an_error_result_naming_the_field(
    service: ToolService, arguments: dict[str, Any], named: str
) -> None:
    result = call(service, ANON, "execute", arguments)
    assert result.is_error is True
    assert named in text_of(result)


def test_a_rate_limited_call_is_an_error_result_saying_how_long_to_wait(_isolated_home: Path) -> None:
    service = make_service(_isolated_home, limit=2)

    async def body(client: Any) -> Any:
        return [await client.call_tool("execute", {"key": "pub.ping"}) for _ in range(3)]

    first, second, third = run(service, OLGA, body)
    assert [first.is_error, second.is_error, third.is_error] == [False, False, True]
    assert text_of(third).startswith("Rate limited: retry after ")
    wait = int(text_of(third).split("retry after ")[1].split()[0])
    assert 1 <= wait <= 60
    assert text_of(third).endswith(" second." if wait == 1 else " seconds.")  # "1 second", "2 seconds"
    assert third.structured_content["error"] == "RateLimited"


def test_an_fn_tool_that_raises_is_an_error_result_with_the_exception_type_and_message(
    service: ToolService,
) -> None:
    result = execute(service, ANON, "pub.boom", {})
    assert result.is_error is True
    assert text_of(result) == "The tool failed: ValueError: kaput"


def test_an_unexpected_server_fault_is_still_a_readable_error_result_not_an_opaque_error(
    service: ToolService, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("index is gone")

    monkeypatch.setattr(service, "search", broken)
    result = call(service, ANON, "search", {"query": "x"})
    assert result.is_error is True
    assert text_of(result) == "The tool failed: RuntimeError: index is gone"


def test_an_unknown_mcp_tool_name_is_an_error_result_suggesting_the_meta_tool(service: ToolService) -> None:
    result = call(service, ANON, "exceute", {"key": "pub.echo"})
    assert result.is_error is True
    assert "Did you mean execute?" in text_of(result)


# -- scoping: hidden looks like missing ---------------------------------------------------------------


def service_without(home: Path, directory: Path, key: str) -> ToolService:
    """The same catalog with one tool removed: what the world looks like if it did not exist."""
    data = yaml.safe_load(CATALOG.read_text(encoding="utf-8"))
    group, name = key.split(".")
    data["tools"] = [t for t in data["tools"] if (t.get("group", data["group"]), t["name"]) != (group, name)]
    directory.mkdir()
    shutil.copy(CATALOG.with_name("mcp_fns.py"), directory)
    path = write_catalog(directory, yaml.safe_dump(data))
    return ToolService.from_paths([str(path)], Settings.load(environ={"TOOLRUN_HOME": str(home)}))


def test_a_hidden_tool_is_indistinguishable_from_a_nonexistent_one(
    service: ToolService, _isolated_home: Path, tmp_path: Path
) -> None:
    def answers(service: ToolService, key: str) -> list[Any]:
        async def body(client: Any) -> list[Any]:
            executed = await client.call_tool("execute", {"key": key, "arguments": {"service": "db"}})
            described = await client.call_tool("describe_tools", {"keys": [key]})
            searched = await client.call_tool("search", {"query": "restart service"})
            listed = await client.call_tool("whoami", {})
            return [executed, described, searched, listed]

        return [(r.is_error, r.content, r.structured_content) for r in run(service, ANON, body)]

    without = service_without(_isolated_home, tmp_path / "without", "ops.restart")
    assert "ops.restart" in service.registry.tools and "ops.restart" not in without.registry.tools
    assert answers(service, "ops.restart") == answers(without, "ops.restart")
    is_error, content, _ = answers(service, "ops.restart")[0]
    assert is_error is True
    assert content[0].text.startswith("No tool 'ops.restart' is available to you.")
    # ... while a caller of group ops sees and runs it.
    assert execute(service, OLGA, "ops.restart", {"service": "db"}).structured_content["stdout"] == "restarted db"


def test_a_search_that_only_a_hidden_tool_fully_matches_answers_as_if_it_did_not_exist(
    service: ToolService, _isolated_home: Path, tmp_path: Path
) -> None:
    without = service_without(_isolated_home, tmp_path / "without", "ops.restart")
    query = {"query": "restart message"}  # ops.restart matches `restart`; a public tool `message`
    expected = call(without, ANON, "search", query).structured_content
    assert expected["items"] != []
    assert call(service, ANON, "search", query).structured_content == expected


def test_in_direct_mode_a_hidden_tools_name_gets_the_answer_a_made_up_name_gets(
    service: ToolService, _isolated_home: Path, tmp_path: Path
) -> None:
    without = service_without(_isolated_home, tmp_path / "without", "ops.restart")

    def answer(service: ToolService) -> tuple[Any, ...]:
        async def body(client: Any) -> Any:
            return await client.list_tools(), await client.call_tool("ops__restart", {"service": "db"})

        listed, called = run(service, ANON, body, direct=True)
        return [t.name for t in listed.tools], called.is_error, called.content, called.structured_content

    assert answer(service) == answer(without)
    assert answer(service)[1] is True
    assert text_of(call(service, OLGA, "ops__restart", {"service": "db"}, direct=True)) == "restarted db"


# -- sessions -----------------------------------------------------------------------------------------


def test_an_fn_tool_keeps_session_values_across_calls_of_one_session(service: ToolService) -> None:
    async def body(client: Any) -> list[str]:
        return [
            text_of(await client.call_tool("execute", {"key": "pub.remember", "arguments": {"value": v}}))
            for v in ("a", "b", "c")
        ]

    assert run(service, OLGA, body, session="stdio-1") == ["unset|True", "a|True", "b|True"]
    assert run(service, OLGA, body, session="stdio-2") == ["unset|True", "a|True", "b|True"]


def test_without_any_session_a_call_is_identity_only_and_nothing_is_kept(service: ToolService) -> None:
    async def body(client: Any) -> list[str]:
        return [
            text_of(await client.call_tool("execute", {"key": "pub.remember", "arguments": {"value": v}}))
            for v in ("a", "b")
        ]

    assert run(service, OLGA, body) == ["unset|False", "unset|False"]


def test_a_named_session_passed_to_execute_is_kept_per_user(service: ToolService) -> None:
    def remember(identity: Identity, value: str) -> str:
        args = {"key": "pub.remember", "arguments": {"value": value}, "session": "s1"}
        return text_of(call(service, identity, "execute", args))

    assert remember(OLGA, "olga-1") == "unset|True"
    assert remember(OLGA, "olga-2") == "olga-1|True"
    assert remember(ADA, "ada-1") == "unset|True"  # the same name, another user: not shared
    assert remember(OLGA, "olga-3") == "olga-2|True"


# -- direct mode ----------------------------------------------------------------------------------------


def test_direct_names_use_only_the_characters_mcp_clients_accept() -> None:
    assert direct_name("ops.disk_usage") == "ops__disk_usage"
    assert direct_name("pub.stdin-json") == "pub__stdin-json"
    assert direct_name("team.infra.restart") == "team__infra__restart"
    assert len(direct_name("g." + "x" * 100)) == 64


def test_direct_mode_also_lists_each_accessible_tool_with_a_json_schema_from_its_params(
    service: ToolService,
) -> None:
    async def body(client: Any) -> Any:
        return (await client.list_tools()).tools

    tools = run(service, OLGA, body, direct=True)
    names = [t.name for t in tools]
    assert names[:4] == META_TOOLS
    assert names[4:] == [direct_name(k) for k in OPS_KEYS]
    assert "finance__payroll" not in names
    assert all(set(n) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") for n in names)
    by_name = {t.name: t for t in tools}
    assert by_name["pub__count"].title == "pub.count"
    assert by_name["pub__count"].description == "Echo an integer between 0 and 100."
    assert by_name["pub__count"].input_schema == {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 100}},
        "required": ["n"],
        "additionalProperties": False,
    }
    assert by_name["pub__level"].input_schema["properties"]["level"] == {
        "type": "string",
        "default": "info",
        "enum": ["debug", "info"],
    }
    assert by_name["pub__echo"].input_schema["properties"]["msg"] == {
        "type": "string",
        "description": "The message.",
        "examples": ["hi"],
    }
    assert by_name["pub__stdin-json"].input_schema["properties"]["tags"] == {"type": "array"}
    assert by_name["pub__stdin-json"].input_schema["required"] == ["name"]


def test_every_direct_schema_is_a_valid_json_schema(service: ToolService) -> None:
    for tool in service.registry.tools.values():
        jsonschema.Draft202012Validator.check_schema(param_schema(tool))


def test_direct_mode_calls_a_tool_by_its_mapped_name_through_the_same_validation(service: ToolService) -> None:
    assert text_of(call(service, ANON, "pub__echo", {"msg": "direct"}, direct=True)) == "direct"
    bad = call(service, ANON, "pub__count", {"n": "lots"}, direct=True)
    assert bad.is_error is True
    assert "'n'" in text_of(bad)


def test_without_direct_mode_a_tools_direct_name_is_not_callable(service: ToolService) -> None:
    result = call(service, ANON, "pub__echo", {"msg": "x"})
    assert result.is_error is True
    assert "No tool 'pub__echo'" in text_of(result)


# -- mcp-config snippets ----------------------------------------------------------------------------


def test_the_claude_desktop_snippet_starts_toolrun_over_stdio_with_absolute_paths(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    snippet = mcp_config_snippet("claude-desktop", ["tools.yaml", "more/"], "bin/toolrun")
    assert json.loads(snippet) == {
        "mcpServers": {
            "toolrun": {
                "command": str(tmp_path / "bin" / "toolrun"),
                "args": ["serve", "--stdio", "-c", str(tmp_path / "tools.yaml"), "-c", str(tmp_path / "more")],
            }
        }
    }
    assert snippet.endswith("}\n")


def test_the_claude_desktop_snippet_can_carry_an_api_key_placeholder_and_environment() -> None:
    snippet = mcp_config_snippet(
        "claude-desktop", ["/c/tools.yaml"], "/v/toolrun", api_key=True, env={"TOOLRUN_HOME": "/h"}
    )
    entry = json.loads(snippet)["mcpServers"]["toolrun"]
    assert entry["env"] == {"TOOLRUN_HOME": "/h", "TOOLRUN_API_KEY": "<your toolrun API key>"}


def test_the_claude_code_snippet_is_one_shell_command_with_the_server_after_a_double_dash() -> None:
    snippet = mcp_config_snippet("claude-code", ["/my catalogs/tools.yaml"], "/v/toolrun", api_key=True)
    assert snippet == (
        "claude mcp add toolrun -e 'TOOLRUN_API_KEY=<your toolrun API key>' -- "
        "/v/toolrun serve --stdio -c '/my catalogs/tools.yaml'\n"
    )
    assert shlex.split(snippet)[-5:] == ["/v/toolrun", "serve", "--stdio", "-c", "/my catalogs/tools.yaml"]


def test_the_claude_code_http_snippet_adds_the_url_with_a_key_header() -> None:
    snippet = mcp_config_snippet("claude-code", [], "/v/toolrun", url="http://127.0.0.1:8080/mcp", api_key=True)
    assert shlex.split(snippet) == [
        "claude",
        "mcp",
        "add",
        "--transport",
        "http",
        "toolrun",
        "http://127.0.0.1:8080/mcp",
        "--header",
        "X-API-Key: <your toolrun API key>",
    ]


def test_the_vscode_snippet_is_an_mcp_json_with_a_stdio_server_and_a_prompted_key() -> None:
    document = json.loads(mcp_config_snippet("vscode", ["/c/tools.yaml"], "/v/toolrun", api_key=True))
    assert document["servers"] == {
        "toolrun": {
            "type": "stdio",
            "command": "/v/toolrun",
            "args": ["serve", "--stdio", "-c", "/c/tools.yaml"],
            "env": {"TOOLRUN_API_KEY": "${input:toolrun-api-key}"},
        }
    }
    assert document["inputs"] == [
        {"type": "promptString", "id": "toolrun-api-key", "description": "toolrun API key", "password": True}
    ]


def test_the_vscode_http_snippet_sends_the_key_header() -> None:
    document = json.loads(mcp_config_snippet("vscode", [], "/v/toolrun", url="http://h:1/mcp", api_key=True))
    assert document["servers"]["toolrun"] == {
        "type": "http",
        "url": "http://h:1/mcp",
        "headers": {"X-API-Key": "${input:toolrun-api-key}"},
    }


def test_an_unknown_client_or_claude_desktop_over_http_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="use one of claude-desktop, claude-code, vscode"):
        mcp_config_snippet("emacs", [], "/v/toolrun")
    with pytest.raises(ValueError, match="Connectors"):
        mcp_config_snippet("claude-desktop", [], "/v/toolrun", url="http://h/mcp")


def test_find_toolrun_prefers_the_running_script_then_the_one_beside_python(tmp_path: Path) -> None:
    assert find_toolrun("/opt/venv/bin/toolrun", "/usr/bin/python3") == "/opt/venv/bin/toolrun"
    (tmp_path / "toolrun").touch()
    assert find_toolrun("/usr/lib/python3/pytest", str(tmp_path / "python")) == str(tmp_path / "toolrun")


# -- a context budget -------------------------------------------------------------------------------


def test_meta_tool_schema_examples_name_a_tool_the_caller_may_see(service: ToolService) -> None:
    async def body(client: Any) -> Any:
        return {t.name: t for t in (await client.list_tools()).tools}

    for identity in (ANON, OLGA):
        tools = run(service, identity, body)
        example = tools["execute"].input_schema["properties"]["key"]["description"]
        shown = example.removeprefix("Tool key, e.g. ").removesuffix(".")
        assert shown in [t.key for t in service.list(identity)]
        assert "ops.disk_usage" not in json.dumps([t.model_dump() for t in tools.values()])
    # An anonymous caller's schemas never name a hidden tool.
    anon = json.dumps([t.model_dump() for t in run(service, ANON, body).values()])
    assert not any(key in anon for key in ALL_KEYS if key not in PUBLIC_KEYS)


def test_describe_tools_text_is_a_signature_with_constraints_then_the_details(service: ToolService) -> None:
    result = call(service, ANON, "describe_tools", {"keys": ["pub.count", "nope.x"]})
    assert text_of(result) == (
        "pub.count(n: int [0..100])\n"
        "Echo an integer between 0 and 100.\n"
        "returns: str | (int, str, str)\n"
        "example: pub.count(n=0)\n\n"
        "Not found: nope.x. Use `search` to find tools."
    )
    assert result.structured_content["tools"][0]["params"][0]["max"] == 100
