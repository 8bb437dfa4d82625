"""Typed outputs (`output:` of exec and curl tools): parsed, checked against a schema, and the same value
through every door (service, REST, MCP direct and `execute`, CLI, a job's result); bad output is a failed
call naming the first mismatch, with the raw text kept; the catalog checks the schema and warns about a
`format: json` command that obviously prints text."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from typer.testing import CliRunner

from support.app import BASE_URL, load_settings
from support.binaries import require_binary
from support.catalogs import write_catalog
from support.http import local_http
from toolrun import catalog
from toolrun.cli import app
from toolrun.errors import CatalogError, OutputInvalid
from toolrun.jobrecord import result_answer
from toolrun.models import Identity
from toolrun.server.mcp.door import McpDoor, build_server
from toolrun.service import ToolService

DISK_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "used": {"type": "integer", "minimum": 0}},
    "required": ["path", "used"],
    "additionalProperties": False,
}

TOOLS = """\
version: 1
group: sys
tools:
  - name: disk
    public: true
    description: Disk use of a path, as JSON.
    exec: |
      printf '{"path": "%s", "used": %s}' {{ path | quote }} {{ used | quote }}
    params:
      - {name: path, type: str, example: /tmp}
      - {name: used, type: str, example: "12"}
    output:
      format: json
      schema: DISK_SCHEMA
  - name: disk-file
    public: true
    description: The same, with its schema in a file.
    exec: |
      printf '{"path": "/srv", "used": 3}'
    output: {format: json, schema: disk.schema.yaml}
  - name: anyjson
    public: true
    description: Any JSON at all.
    exec: |
      printf '[1, "two", null]'
    output: {format: json}
  - name: notjson
    public: true
    description: Claims JSON, prints text.
    exec: printf 'total 12\\n'
    output: {format: json}
  - name: names
    public: true
    description: Names, one a line.
    exec: printf 'ada\\nolga\\n'
    output: {format: lines}
  - name: disk-approved
    description: The same, after an approval.
    exec: |
      printf '{"path": "/ok", "used": 1}'
    output: {format: json, schema: DISK_SCHEMA}
    approval: required
    approvers: [oncall]
  - name: broken
    public: true
    description: Fails before printing JSON.
    exec: printf 'no disk' >&2; exit 4
    output: {format: json, schema: DISK_SCHEMA}
""".replace("DISK_SCHEMA", json.dumps(DISK_SCHEMA))

ANYONE = Identity(client="10.0.0.9")


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    (tmp_path / "disk.schema.yaml").write_text(
        "type: object\nproperties:\n  path: {type: string}\n  used: {type: integer}\nrequired: [path, used]\n"
    )
    return write_catalog(tmp_path, TOOLS)


@pytest.fixture
def service(tools_file: Path) -> ToolService:
    return ToolService(catalog.load([str(tools_file)], {}), environ={})


def call(service: ToolService, key: str, args: dict[str, Any] | None = None) -> Any:
    return asyncio.run(service.call(ANYONE, key, args or {}))


# -- the core -------------------------------------------------------------------------------------


def test_json_output_is_parsed_checked_and_kept_as_data(service: ToolService) -> None:
    result = call(service, "sys.disk", {"path": "/tmp", "used": "12"})
    assert result.typed and result.value == {"path": "/tmp", "used": 12}
    assert call(service, "sys.disk-file").value == {"path": "/srv", "used": 3}
    assert call(service, "sys.anyjson").value == [1, "two", None]
    assert call(service, "sys.names").value == ["ada", "olga"]


def test_output_that_breaks_the_schema_fails_the_call_naming_the_first_mismatch(service: ToolService) -> None:
    with pytest.raises(OutputInvalid) as caught:
        call(service, "sys.disk", {"path": "/tmp", "used": '"many"'})
    assert "does not match its output schema: at /used: 'many' is not of type 'integer'" in str(caught.value)
    assert caught.value.output == '{"path": "/tmp", "used": "many"}'
    with pytest.raises(OutputInvalid, match=r"at /used: -1 is less than the minimum of 0"):
        call(service, "sys.disk", {"path": "/tmp", "used": "-1"})


def test_output_that_is_not_json_fails_the_call_with_where_it_stops(service: ToolService) -> None:
    with pytest.raises(OutputInvalid) as caught:
        call(service, "sys.notjson")
    assert str(caught.value) == (
        "tool sys.notjson declares JSON output, but it is not JSON at line 1 column 1: Expecting value"
    )
    assert caught.value.output == "total 12\n"
    with pytest.raises(OutputInvalid, match="at line 1 column 29: Extra data"):
        call(service, "sys.disk", {"path": "/tmp", "used": "1} {"})


def test_a_failed_command_keeps_its_exit_code_and_streams(service: ToolService) -> None:
    result = call(service, "sys.broken")
    assert not result.typed and result.value == (4, "", "no disk")


def test_the_return_type_is_said_in_types_and_words(service: ToolService) -> None:
    from toolrun.formatting import describe_text

    disk = service.describe(ANYONE, "sys.disk")
    assert disk.return_type == "{path: str, used: int} | (int, str, str)"
    assert service.describe(ANYONE, "sys.names").return_type == "list[str] | (int, str, str)"
    assert service.describe(ANYONE, "sys.anyjson").return_type == "json | (int, str, str)"
    text = describe_text(disk)
    assert "returns: {path: str, used: int} | (int, str, str)" in text
    assert "parsed as JSON and checked against the tool's output schema" in text
    assert disk.entry()["output"] == {"format": "json", "schema": DISK_SCHEMA}


# -- the catalog ------------------------------------------------------------------------------------


def load_problems(tmp_path: Path, tool: str) -> list[str]:
    path = write_catalog(tmp_path, "version: 1\ngroup: g\ntools:\n" + tool)
    try:
        loaded = catalog.load([str(path)], {}, catalog.LoadOptions(check=True))
    except CatalogError as exc:
        return [str(p) for p in exc.problems]
    return [str(p) for p in loaded.warnings]


def test_a_schema_that_is_not_a_json_schema_is_a_catalog_error(tmp_path: Path) -> None:
    problems = load_problems(
        tmp_path, "  - name: t\n    exec: echo '{}'\n    output: {format: json, schema: {type: 12}}\n"
    )
    assert len(problems) == 1
    assert "g.t: the output schema is not a valid JSON Schema: at /type: 12 is not valid under any" in problems[0]
    assert problems[0].startswith(str(tmp_path / "tools.yaml") + ":6:")


def test_a_schema_file_that_is_missing_is_a_catalog_error(tmp_path: Path) -> None:
    tool = "  - name: t\n    exec: echo '{}'\n    output: {format: json, schema: nope.json}\n"
    problems = load_problems(tmp_path, tool)
    assert len(problems) == 1 and "cannot read the output schema file 'nope.json': No such file" in problems[0]


def test_a_schema_on_a_format_that_is_not_json_is_refused(tmp_path: Path) -> None:
    problems = load_problems(tmp_path, "  - name: t\n    exec: echo a\n    output: {format: lines, schema: {}}\n")
    assert len(problems) == 1 and "`schema` applies with `format: json` only (not lines)" in problems[0]


def test_a_json_tool_whose_command_obviously_prints_text_is_warned_about(tmp_path: Path) -> None:
    problems = load_problems(tmp_path, "  - name: t\n    exec: df -h | grep / | wc -l\n    output: {format: json}\n")
    assert len(problems) == 1
    assert "warning: `output: {format: json}`, but its command ends with `wc`, which prints text" in problems[0]
    assert problems[0].endswith("[output-not-json]")
    echo = load_problems(tmp_path, "  - name: t\n    exec: echo done\n    output: {format: json}\n")
    assert len(echo) == 1 and "echoes 'done', which is not JSON" in echo[0]
    fine = "  - name: t\n    exec: ls -la | jq -R . | jq -s .\n    output: {format: json}\n"
    assert load_problems(tmp_path, fine) == []
    echoed = "  - name: t\n    exec: |\n      echo '{\"a\": 1}'\n    output: {format: json}\n"
    assert load_problems(tmp_path, echoed) == []


def test_toolrun_test_checks_each_examples_output_against_the_schema(tmp_path: Path) -> None:
    tool = (
        "  - name: t\n    exec: |\n      printf '{\"n\": %s}' {{ n | quote }}\n    params: [{name: n, type: str}]\n"
        "    output: {format: json, schema: {type: object, properties: {n: {type: integer}}}}\n"
        "    examples:\n      - {name: good, args: {n: '1'}, expect: {json: {n: 1}}}\n"
        "      - {name: bad, args: {n: '\"x\"'}}\n"
    )
    path = write_catalog(tmp_path, "version: 1\ngroup: g\ntools:\n" + tool)
    result = CliRunner().invoke(app, ["test", str(path)])
    assert result.exit_code == 1, result.output
    assert "good" in result.stdout and "bad" in result.stdout
    assert "at /n: 'x' is not of type 'integer'" in result.stdout
    assert "1 passed, 1 failed" in result.stdout


# -- the doors ------------------------------------------------------------------------------------


def test_the_cli_prints_the_value_and_json_as_data(tools_file: Path) -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["call", "sys.disk", "path=/a", "used=5", "-c", str(tools_file)])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == {"path": "/a", "used": 5}
    as_json = runner.invoke(app, ["call", "sys.disk", "path=/a", "used=5", "--json", "-c", str(tools_file)])
    assert json.loads(as_json.stdout)["result"] == {"path": "/a", "used": 5}
    bad = runner.invoke(app, ["call", "sys.notjson", "-c", str(tools_file)])
    assert bad.exit_code == 1
    assert bad.stdout == "total 12\n"  # the raw text stays the caller's
    assert "toolrun: tool sys.notjson declares JSON output, but it is not JSON at line 1" in bad.stderr
    bad_json = runner.invoke(app, ["call", "sys.notjson", "--json", "-c", str(tools_file)])
    assert json.loads(bad_json.stdout)["output"] == "total 12\n"


def test_rest_answers_the_value_as_json_and_a_mismatch_as_a_502_with_the_raw_text(
    tools_file: Path, tmp_path: Path
) -> None:
    from starlette.testclient import TestClient

    from toolrun.server.run import build_app

    built = build_app(load_settings(tmp_path / "home"), [str(tools_file)])
    with TestClient(built, base_url=BASE_URL) as client:
        plain = client.post("/tools/sys.disk", json={"path": "/b", "used": "7"})
        assert plain.status_code == 200 and plain.headers["content-type"] == "application/json"
        assert plain.json() == {"path": "/b", "used": 7}
        asked = client.post("/tools/sys.names", json={}, headers={"Accept": "application/json"})
        assert asked.json()["result"] == ["ada", "olga"] and asked.json()["stdout"] == "ada\nolga\n"
        assert asked.json()["typed"] is True
        bad = client.post("/tools/sys.disk", json={"path": "/b", "used": '"x"'}, headers={"Accept": "application/json"})
        assert bad.status_code == 502
        assert bad.json() == {
            "error": "tool sys.disk printed JSON that does not match its output schema: at /used: 'x' is not of type "
            "'integer'",
            "type": "OutputInvalid",
            "output": '{"path": "/b", "used": "x"}',
        }
        text = client.post("/tools/sys.notjson", json={})
        assert text.status_code == 502 and text.text.endswith("\n\ntotal 12\n")
        described = client.get("/tools/sys.disk").json()
        assert described["output"] == {"format": "json", "schema": DISK_SCHEMA}


def mcp(service: ToolService, body: Any, direct: bool = True) -> Any:
    door = McpDoor(service, lambda ctx: ANYONE, direct=direct)

    async def main() -> Any:
        async with Client(build_server(door)) as client:
            return await body(client)

    return anyio.run(main)


def test_mcp_direct_mode_declares_the_output_schema_and_answers_structured_content(service: ToolService) -> None:
    async def body(client: Any) -> Any:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        disk = next(t for t in listed.values() if t.title == "sys.disk")
        names = next(t for t in listed.values() if t.title == "sys.names")
        plain = await client.call_tool(disk.name, {"path": "/c", "used": "2"})
        lines = await client.call_tool(names.name, {})
        bad = await client.call_tool(disk.name, {"path": "/c", "used": '"x"'})
        failed = await client.call_tool(next(n for n, t in listed.items() if t.title == "sys.broken"), {})
        return disk, names, plain, lines, bad, failed

    disk, names, plain, lines, bad, failed = mcp(service, body)
    assert disk.output_schema == DISK_SCHEMA
    assert names.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "string"}}},
        "required": ["result"],
    }
    assert not plain.is_error and plain.structured_content == {"path": "/c", "used": 2}
    jsonschema.validate(plain.structured_content, disk.output_schema)
    assert lines.structured_content == {"result": ["ada", "olga"]}
    jsonschema.validate(lines.structured_content, names.output_schema)
    assert bad.is_error and bad.structured_content["output"] == '{"path": "/c", "used": "x"}'
    assert "at /used: 'x' is not of type 'integer'" in bad.content[0].text
    assert failed.is_error and "exited with code 4" in failed.content[0].text


def test_mcp_execute_and_describe_tools_carry_the_value_and_the_schema(service: ToolService) -> None:
    async def body(client: Any) -> Any:
        run = await client.call_tool("execute", {"key": "sys.disk", "arguments": {"path": "/d", "used": "1"}})
        described = await client.call_tool("describe_tools", {"keys": ["sys.disk"]})
        return run, described

    run, described = mcp(service, body, direct=False)
    assert run.structured_content["result"] == {"path": "/d", "used": 1}
    assert json.loads(run.content[0].text) == {"path": "/d", "used": 1}
    entry = described.structured_content["tools"][0]
    assert entry["output"] == {"format": "json", "schema": DISK_SCHEMA}
    assert "returns: {path: str, used: int} | (int, str, str)" in described.content[0].text


def test_a_jobs_result_keeps_the_value(service: ToolService) -> None:
    user = Identity("ada", groups=frozenset({"admin"}), anonymous=False, source="key", person="user:ada")

    async def main() -> Any:
        job = await service.jobs.submit(user, "sys.disk", {"path": "/j", "used": "9"}, as_json=True)
        return await service.jobs.wait(user, job.id, 10.0)

    job = asyncio.run(main())
    assert job.state == "succeeded" and job.result is not None
    text, payload = result_answer(job.result)
    assert payload["result"] == {"path": "/j", "used": 9}
    assert json.loads(text) == {"path": "/j", "used": 9}


def test_an_approved_typed_call_in_direct_mode_answers_the_declared_structure(service: ToolService) -> None:
    import mcp_types as types

    alice = Identity("alice", groups=frozenset({"sys"}), anonymous=False, source="key", person="user:alice")
    bob = Identity("bob", groups=frozenset({"oncall"}), anonymous=False, source="key", person="user:bob")
    door = McpDoor(service, lambda ctx: alice, direct=True)

    async def approve(context: Any, params: Any) -> Any:
        job = params.message.split("(job ", 1)[1].split(")", 1)[0]
        await service.jobs.approve(bob, job)
        return types.ElicitResult(action="accept")

    async def main() -> Any:
        async with Client(build_server(door), mode="2026-07-28", elicitation_callback=approve) as client:
            listed = {t.title: t for t in (await client.list_tools()).tools}
            tool = listed["sys.disk-approved"]
            return tool, await client.call_tool(tool.name, {})

    tool, answer = anyio.run(main)
    assert not answer.is_error, answer
    assert answer.structured_content == {"path": "/ok", "used": 1}
    jsonschema.validate(answer.structured_content, tool.output_schema)


# -- curl -----------------------------------------------------------------------------------------


class _Inventory(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"items": [{"sku": "a1", "count": 3}]}' if self.path == "/good" else b'{"items": [{"sku": 5}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def inventory() -> Iterator[str]:
    require_binary("curl")
    with local_http(_Inventory) as url:
        yield url


def test_a_typed_curl_tool_answers_its_checked_body(tmp_path: Path, inventory: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"sku": {"type": "string"}, "count": {"type": "integer"}}},
            }
        },
        "required": ["items"],
    }
    tool = (
        "  - name: stock\n    public: true\n    sandbox: false\n    curl: '{{ url | quote }}'\n"
        "    params: [{name: url, type: str}]\n"
        f"    output: {{format: json, schema: {json.dumps(schema)}}}\n"
    )
    path = write_catalog(tmp_path, "version: 1\ngroup: web\ntools:\n" + tool)
    service = ToolService(catalog.load([str(path)], {}), environ={})
    good = call(service, "web.stock", {"url": inventory + "/good"})
    assert good.value == {"items": [{"sku": "a1", "count": 3}]}
    shown = service.describe(ANYONE, "web.stock").return_type
    assert shown == "{items: list[{sku?: str, count?: int}]} | (int, str, str)"
    with pytest.raises(OutputInvalid, match=r"at /items/0/sku: 5 is not of type 'string'"):
        call(service, "web.stock", {"url": inventory + "/bad"})
