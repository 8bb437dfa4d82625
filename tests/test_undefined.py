"""A left-out optional param without a default is *not provided*: undefined in the template.

Rendering it raises before anything is spawned, on every door (HTTP 500 `Type: message`, the
traceback under debug; an MCP error result; CLI exit 2 naming the variable), with or without
`| quote`, while the guards `{% if x %}`, `{% if x is defined %}` and `x | default(...)` still
work. Stdin JSON leaves it out; an fn tool gets None.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from starlette.testclient import TestClient
from typer.testing import CliRunner

from support.catalogs import write_catalog
from toolrun.cli import app as cli_app
from toolrun.models import Identity
from toolrun.server.mcp.door import McpDoor, build_server
from toolrun.server.run import build_app
from toolrun.service import ToolService
from toolrun.settings import Settings

FNS = """\
def show(ghost: str | None = "fn-default") -> str:
    return repr(ghost)
"""

CATALOG = """\
version: 1
group: t
tools:
  - name: bare
    public: true
    exec: touch {{ marker | quote }} && printf '[%s]' {{ ghost }}
    params:
      - {name: marker, type: str}
      - {name: ghost, type: str, required: false}
  - name: quoted
    public: true
    exec: touch {{ marker | quote }} && printf '[%s]' {{ ghost | quote }}
    params:
      - {name: marker, type: str}
      - {name: ghost, type: str, required: false}
  - name: jinja
    public: true
    exec: "touch {{ marker | quote }} && printf '[%s]' {{ ghost | upper }}"
    params:
      - {name: marker, type: str}
      - {name: ghost, type: str, required: false}
  - name: guarded
    public: true
    exec: >-
      printf '[%s]' x{% if ghost %}-if={{ ghost | quote }}{% endif %}{% if ghost is defined %}-def{% endif
      %}{% if ghost is not defined %}-undef{% endif %}{% if not ghost %}-not{% endif
      %}-{{ ghost | default('dflt') }}
    params:
      - {name: ghost, type: str, required: false}
  - name: json_in
    public: true
    stdin: true
    exec: cat
    params:
      - {name: ghost, type: str, required: false}
      - {name: n, type: int, default: 3}
  - name: fn
    public: true
    fn: undefined_fns:show
    params:
      - {name: ghost, type: str, required: false}
"""


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    directory = tmp_path / "catalog"
    directory.mkdir()
    (directory / "undefined_fns.py").write_text(FNS, encoding="utf-8")
    return write_catalog(directory, CATALOG)


@pytest.fixture
def service(catalog: Path, tmp_path: Path) -> ToolService:
    settings = Settings.load(environ={"TOOLRUN_HOME": str(tmp_path / "home")})
    return ToolService.from_paths([str(catalog)], settings)


def http_client(catalog: Path, tmp_path: Path, debug: bool = False) -> Iterator[TestClient]:
    settings = Settings.load(flags={"debug": debug}, environ={"TOOLRUN_HOME": str(tmp_path / "home")})
    with TestClient(build_app(settings, [str(catalog)]), base_url="http://127.0.0.1") as client:
        yield client


@pytest.fixture
def http(catalog: Path, tmp_path: Path) -> Iterator[TestClient]:
    yield from http_client(catalog, tmp_path)


@pytest.fixture
def http_debug(catalog: Path, tmp_path: Path) -> Iterator[TestClient]:
    yield from http_client(catalog, tmp_path, debug=True)


def post(client: TestClient, key: str, body: dict[str, Any]) -> Any:
    return client.post(f"/tools/{key}", json=body)


# -- HTTP ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["t.bare", "t.quoted", "t.jinja"])
def test_http_a_left_out_optional_param_is_a_500_naming_it_and_nothing_runs(
    http: TestClient, tmp_path: Path, key: str
) -> None:
    marker = tmp_path / "ran"
    response = post(http, key, {"marker": str(marker)})

    assert response.status_code == 500
    assert response.text.startswith("UndefinedError: 'ghost' is undefined")
    assert "\n" not in response.text.strip()
    assert not marker.exists()


def test_http_the_same_call_with_the_value_runs(http: TestClient, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    response = post(http, "t.quoted", {"marker": str(marker), "ghost": "a b"})

    assert response.status_code == 200
    assert response.text == "[a b]"
    assert marker.exists()


def test_http_under_debug_the_body_is_the_traceback(http_debug: TestClient, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    response = post(http_debug, "t.bare", {"marker": str(marker)})

    assert response.status_code == 500
    assert response.text.startswith("Traceback")
    assert "UndefinedError: 'ghost' is undefined" in response.text
    assert not marker.exists()


def test_http_guards_see_a_left_out_param_as_undefined_and_false(http: TestClient) -> None:
    assert post(http, "t.guarded", {}).text == "[x-undef-not-dflt]"
    assert post(http, "t.guarded", {"ghost": "g"}).text == "[x-if=g-def-g]"


# -- MCP -----------------------------------------------------------------------------------------


def mcp_execute(service: ToolService, key: str, arguments: dict[str, Any]) -> Any:
    door = McpDoor(service, lambda ctx: Identity(client="10.0.0.9"))

    async def main() -> Any:
        async with Client(build_server(door)) as client:
            return await client.call_tool("execute", {"key": key, "arguments": arguments})

    return anyio.run(main)


def test_mcp_execute_of_a_left_out_param_is_an_error_result_and_nothing_runs(
    service: ToolService, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    result = mcp_execute(service, "t.quoted", {"marker": str(marker)})

    assert result.is_error
    text = result.content[0].text
    assert "UndefinedError: 'ghost' is undefined" in text
    assert not marker.exists()


def test_mcp_execute_guards_still_work(service: ToolService) -> None:
    result = mcp_execute(service, "t.guarded", {})
    assert not result.is_error
    assert result.content[0].text == "[x-undef-not-dflt]"


# -- CLI -----------------------------------------------------------------------------------------


def cli(catalog: Path, *args: str) -> Any:
    return CliRunner().invoke(cli_app, [*args, "-c", str(catalog)])


@pytest.mark.parametrize("key", ["t.bare", "t.quoted"])
def test_cli_a_left_out_param_exits_2_naming_the_variable_and_nothing_runs(
    catalog: Path, tmp_path: Path, key: str
) -> None:
    marker = tmp_path / "ran"
    result = cli(catalog, "call", key, f"marker={marker}")

    assert result.exit_code == 2, result.output
    assert "'ghost' is undefined" in result.stderr
    assert not marker.exists()


def test_cli_dry_run_refuses_the_same_way(catalog: Path, tmp_path: Path) -> None:
    result = cli(catalog, "call", "t.bare", f"marker={tmp_path / 'ran'}", "--dry-run")

    assert result.exit_code == 2
    assert "'ghost' is undefined" in result.stderr


def test_cli_guards_still_work(catalog: Path) -> None:
    result = cli(catalog, "call", "t.guarded")
    assert result.exit_code == 0, result.output
    assert result.stdout == "[x-undef-not-dflt]"


# -- not templates: stdin JSON and fn tools --------------------------------------------------------


def test_stdin_json_leaves_a_left_out_param_out(http: TestClient) -> None:
    assert json.loads(post(http, "t.json_in", {}).text) == {"n": 3}
    assert json.loads(post(http, "t.json_in", {"ghost": "g"}).text) == {"ghost": "g", "n": 3}


def test_an_fn_tool_gets_none_for_a_left_out_param(http: TestClient) -> None:
    assert post(http, "t.fn", {}).text == "None"
    assert post(http, "t.fn", {"ghost": "g"}).text == "'g'"
