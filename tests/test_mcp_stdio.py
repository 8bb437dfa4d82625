"""`toolrun serve --stdio`, a real subprocess driven by the SDK's own stdio client.

One server process is shared by most tests (module fixture: an anyio blocking portal keeps the
client's event loop alive between tests); identity and session tests start their own. Stream
integrity: tools that read stdin, flood stdout, write to /dev/stdout or to the server's own
stdout must never corrupt the protocol, so the next call still gets its exact answer.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from support.keys import mint_key
from support.mcp import ALL_KEYS, CATALOG, HANDSHAKE_VERSIONS, META_TOOLS, MODERN_VERSION, OPS_KEYS, mcp_stdio, text_of
from support.servers import TOOLRUN
from toolrun.cli.mcpconfig import mcp_config_snippet
from toolrun.models import Identity


@dataclass
class Stdio:
    """A live stdio client on one `toolrun serve --stdio` process."""

    portal: BlockingPortal
    client: Any
    errlog: Path

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        return self.portal.call(self.client.call_tool, name, arguments or {})

    def execute(self, key: str, arguments: dict[str, Any] | None = None) -> Any:
        args: dict[str, Any] = {"key": key}
        if arguments is not None:
            args["arguments"] = arguments
        return self.call("execute", args)


@pytest.fixture(scope="module")
def stdio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stdio]:
    base = tmp_path_factory.mktemp("stdio")
    errlog = base / "server-stderr.txt"
    with (
        errlog.open("w") as err,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(mcp_stdio(base / "home", errlog=err)) as client,
    ):
        yield Stdio(portal, client, errlog)


def session(home: Path, errlog: IO[str], body: Any, **kwargs: Any) -> Any:
    """Start a fresh `toolrun serve --stdio`, run `body(client)`, stop it."""

    async def main() -> Any:
        async with mcp_stdio(home, errlog=errlog, **kwargs) as client:
            return await body(client)

    return anyio.run(main)


# -- listing and the meta-tools ---------------------------------------------------------------------


def test_the_stdio_server_lists_the_four_meta_tools(stdio: Stdio) -> None:
    listed = stdio.portal.call(stdio.client.list_tools)
    assert [t.name for t in listed.tools] == META_TOOLS
    assert stdio.client.protocol_version == MODERN_VERSION


def test_execute_over_stdio_runs_a_tool(stdio: Stdio) -> None:
    result = stdio.execute("pub.echo", {"msg": "over stdio"})
    assert result.is_error is False
    assert text_of(result) == "over stdio"


def test_execute_over_stdio_returns_an_exec_failure_as_a_normal_result(stdio: Stdio) -> None:
    result = stdio.execute("pub.fail")
    assert result.is_error is False
    assert result.structured_content["returncode"] == 3
    assert result.structured_content["stderr"] == "err"


def test_search_over_stdio_pages_through_the_operators_tools(stdio: Stdio) -> None:
    first = stdio.call("search", {"limit": 10}).structured_content
    second = stdio.call("search", {"offset": first["next_offset"], "limit": 10}).structured_content
    assert first["has_more"] is True and second["has_more"] is False
    assert [i["key"] for i in first["items"] + second["items"]] == ALL_KEYS


def test_describe_tools_over_stdio_returns_spec_entries(stdio: Stdio) -> None:
    body = stdio.call("describe_tools", {"keys": ["finance.payroll", "no.such"]}).structured_content
    assert [t["key"] for t in body["tools"]] == ["finance.payroll"]
    assert body["not_found"] == ["no.such"]


def test_by_default_the_stdio_server_acts_for_the_local_operator_who_sees_every_tool(stdio: Stdio) -> None:
    body = stdio.call("whoami").structured_content
    assert body["username"] == Identity.operator().username
    assert body["groups"] == ["admin"]
    assert body["tools"] == ALL_KEYS


def test_errors_over_stdio_are_readable_error_results(stdio: Stdio) -> None:
    unknown = stdio.execute("pub.ech", {"msg": "x"})
    assert unknown.is_error is True
    assert "Did you mean pub.echo" in text_of(unknown)
    bad = stdio.execute("pub.count", {"n": "many"})
    assert bad.is_error is True
    assert "'n'" in text_of(bad)
    raised = stdio.execute("pub.boom", {})
    assert raised.is_error is True
    assert text_of(raised) == "The tool failed: ValueError: kaput"


# -- stream integrity ---------------------------------------------------------------------------------


def test_a_tool_that_reads_stdin_gets_end_of_file_not_the_protocol_stream(stdio: Stdio) -> None:
    result = stdio.execute("pub.cat", {})
    assert result.is_error is False
    assert text_of(result) == ""
    assert text_of(stdio.execute("pub.echo", {"msg": "still here"})) == "still here"


def test_a_stdin_mode_tool_reads_its_parameters_as_json(stdio: Stdio) -> None:
    result = stdio.execute("pub.stdin-json", {"name": "n1", "tags": ["a", "b"]})
    assert json.loads(text_of(result)) == {"name": "n1", "tags": ["a", "b"]}
    assert text_of(stdio.execute("pub.echo", {"msg": "after stdin"})) == "after stdin"


def test_a_tool_printing_five_megabytes_comes_back_whole_and_the_stream_stays_usable(stdio: Stdio) -> None:
    size = 5 * 1024 * 1024
    result = stdio.execute("pub.flood", {"n": size})
    assert result.is_error is False
    text = text_of(result)
    assert len(text) == size
    assert set(text) == {"x"}
    assert result.structured_content["stdout"] == text
    assert text_of(stdio.execute("pub.echo", {"msg": "after flood"})) == "after flood"


def test_a_tool_writing_to_dev_stdout_dev_tty_and_stray_descriptors_cannot_reach_the_protocol(
    stdio: Stdio,
) -> None:
    result = stdio.execute("pub.fds", {})
    assert result.is_error is False
    assert result.structured_content["stdout"] == "to-stdout;done"
    assert text_of(stdio.execute("pub.echo", {"msg": "after fds"})) == "after fds"


def test_control_bytes_invalid_utf8_and_a_json_rpc_lookalike_in_tool_output_arrive_as_plain_text(
    stdio: Stdio,
) -> None:
    result = stdio.execute("pub.binary", {})
    assert result.is_error is False
    assert text_of(result) == 'a\x00b\ufffdc\r\n\x1b[31m\n{"jsonrpc":"2.0","id":1,"result":{}}\n'
    assert text_of(stdio.execute("pub.echo", {"msg": "after binary"})) == "after binary"


def test_an_fn_tool_printing_to_the_servers_own_stdout_lands_on_stderr_not_in_the_protocol(
    stdio: Stdio,
) -> None:
    result = stdio.execute("pub.noisy", {})
    assert result.is_error is False
    assert text_of(result) == "quiet"
    assert text_of(stdio.execute("pub.echo", {"msg": "after noise"})) == "after noise"
    log = stdio.errlog.read_text()
    assert "noise from print()" in log
    assert "noise written to fd 1" in log


def test_many_calls_in_flight_at_once_each_get_their_own_answer(stdio: Stdio) -> None:
    async def many() -> list[str]:
        answers: dict[int, str] = {}

        async def one(i: int) -> None:
            answers[i] = text_of(await stdio.client.call_tool("execute", {"key": "pub.count", "arguments": {"n": i}}))

        async with anyio.create_task_group() as tg:
            for i in range(40):
                tg.start_soon(one, i)
        return [answers[i] for i in range(40)]

    assert stdio.portal.call(many) == [str(i) for i in range(40)]


# -- sessions -----------------------------------------------------------------------------------------


def test_an_fn_tool_keeps_session_values_across_calls_within_one_stdio_process(tmp_path: Path, stdio: Stdio) -> None:
    async def body(client: Any) -> list[str]:
        return [
            text_of(await client.call_tool("execute", {"key": "pub.remember", "arguments": {"value": v}}))
            for v in ("a", "b", "c")
        ]

    with (tmp_path / "err.txt").open("w") as err:
        assert session(tmp_path / "home", err, body) == ["unset|True", "a|True", "b|True"]
    # Another process (the module's shared one) is another session: it never saw those values.
    assert text_of(stdio.execute("pub.remember", {"value": "z"})) == "unset|True"


# -- identity from TOOLRUN_API_KEY ----------------------------------------------------------------------


def test_with_toolrun_api_key_the_stdio_server_acts_for_that_keys_user_and_scope(tmp_path: Path) -> None:
    """Started exactly as the `toolrun mcp-config` snippet for Claude Desktop says."""
    home = tmp_path / "home"
    key = mint_key(home, "olga", ["ops"], email="olga@example.com")
    snippet = mcp_config_snippet(
        "claude-desktop", [CATALOG], TOOLRUN, env={"TOOLRUN_HOME": str(home), "TOOLRUN_API_KEY": key}
    )
    entry = json.loads(snippet)["mcpServers"]["toolrun"]

    async def body(client: Any) -> tuple[Any, ...]:
        whoami = await client.call_tool("whoami", {})
        hidden = await client.call_tool("execute", {"key": "finance.payroll"})
        allowed = await client.call_tool("execute", {"key": "ops.restart", "arguments": {"service": "db"}})
        caller = await client.call_tool("execute", {"key": "pub.caller"})
        return whoami.structured_content, hidden, text_of(allowed), caller.structured_content["result"]

    async def main() -> tuple[Any, ...]:
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])
        with (tmp_path / "err.txt").open("w") as err:
            async with Client(stdio_client(params, errlog=err)) as client:
                return await body(client)

    whoami, hidden, allowed, caller = anyio.run(main)
    assert whoami == {"username": "olga", "email": "olga@example.com", "groups": ["ops"], "tools": OPS_KEYS}
    assert hidden.is_error is True
    assert text_of(hidden).startswith("No tool 'finance.payroll' is available to you.")
    assert allowed == "restarted db"
    assert caller == {"username": "olga", "groups": ["ops"]}


def test_an_invalid_toolrun_api_key_makes_the_stdio_server_exit_non_zero_with_a_clear_message(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [TOOLRUN, "serve", "--stdio", "-c", str(CATALOG)],
        env={"PATH": "/usr/bin:/bin", "TOOLRUN_HOME": str(tmp_path / "home"), "TOOLRUN_API_KEY": "trk_nope"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""  # nothing a client could mistake for protocol
    assert "TOOLRUN_API_KEY is not a valid, unexpired, unrevoked key" in done.stderr


def test_a_handshake_era_stdio_client_works_too_here_in_direct_mode(tmp_path: Path) -> None:
    async def body(client: Any) -> tuple[str, list[str], str, str]:
        listed = await client.list_tools()
        meta = await client.call_tool("execute", {"key": "pub.echo", "arguments": {"msg": "legacy"}})
        direct = await client.call_tool("pub__echo", {"msg": "direct"})
        return client.protocol_version, [t.name for t in listed.tools], text_of(meta), text_of(direct)

    with (tmp_path / "err.txt").open("w") as err:
        version, names, meta, direct = session(tmp_path / "home", err, body, mode="legacy", args=["--mcp-direct"])
    assert version in HANDSHAKE_VERSIONS
    assert names == META_TOOLS + [k.replace(".", "__") for k in ALL_KEYS]
    assert meta == "legacy"
    assert direct == "direct"
