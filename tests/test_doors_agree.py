"""Every door shows one tool's constraints and behaviour hints alike.

One tool with four constrained params and every hint, served as `toolrun serve` serves it: the
tool entry (`GET /tools`, `GET /tools/{key}`), MCP `describe_tools` (over `/mcp`), the per-tool
request schema of `/openapi.json`, and MCP direct mode's tool annotations. (The UI form's part is
in test_ui_browser.py.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from starlette.testclient import TestClient

from support.app import BASE_URL, load_settings
from support.catalogs import write_catalog
from toolrun.models import Identity
from toolrun.server.mcp.door import McpDoor, build_server
from toolrun.server.run import build_app

CATALOG = """\
version: 1
group: ops
tools:
  - name: rotate_logs
    public: true
    title: Rotate log files
    read_only: false
    destructive: true
    idempotent: false
    open_world: false
    keywords: [logrotate, compress]
    description: Rotate and compress the log files of a service.
    exec: echo {{ service | quote }} {{ keep }} {{ level | quote }} {{ tags | quote }}
    params:
      - {name: service, type: str, pattern: "[a-z][a-z0-9-]*", max: 40, description: Service name.}
      - {name: keep, type: int, required: false, default: 7, min: 1, max: 90}
      - {name: level, type: str, required: false, default: info, enum: [debug, info, warn]}
      - {name: tags, type: list, required: false, default: [], max: 5, pattern: "[a-z]+"}
  - name: secret_tool
    group: finance
    read_only: true
    description: Hidden from anonymous callers.
    exec: printf hidden
"""
KEY = "ops.rotate_logs"
ANNOTATIONS = {
    "title": "Rotate log files",
    "read_only": False,
    "destructive": True,
    "idempotent": False,
    "open_world": False,
}
CONSTRAINTS = {
    "service": {"pattern": "[a-z][a-z0-9-]*", "max": 40},
    "keep": {"min": 1, "max": 90},
    "level": {"enum": ["debug", "info", "warn"]},
    "tags": {"pattern": "[a-z]+", "max": 5},
}
MCP_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "describe_tools",
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    tmp = tmp_path_factory.mktemp("doors")
    catalog = write_catalog(tmp, CATALOG)
    app = build_app(load_settings(tmp / "home"), [str(catalog)])
    with TestClient(app, base_url=BASE_URL) as client:
        yield client


def constraints_of(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    fields = ("enum", "pattern", "min", "max")
    return {p["name"]: {k: p[k] for k in fields if k in p} for p in entry["params"]}


def describe_over_mcp(client: TestClient) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "describe_tools",
            "arguments": {"keys": [KEY]},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    response = client.post("/mcp", content=json.dumps(body), headers=MCP_HEADERS)
    assert response.status_code == 200, response.text
    text = response.text
    if not text.startswith("{"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    result = json.loads(text)["result"]
    assert result["isError"] is False
    tools: list[dict[str, Any]] = result["structuredContent"]["tools"]
    assert [t["key"] for t in tools] == [KEY]
    described = tools[0]
    # The text an agent reads carries the same limits and hints.
    shown = result["content"][0]["text"]
    assert shown.startswith(
        "ops.rotate_logs(service: str [len ..40; ~[a-z][a-z0-9-]*], keep: int = 7 [1..90], "
        'level: str = "info" [debug|info|warn], tags: list = [] [len ..5; ~[a-z]+])'
    )
    assert "hints: writes, destructive, not idempotent, closed world" in shown
    return described


def test_the_entry_describe_tools_and_openapi_show_the_same_constraints_and_hints(client: TestClient) -> None:
    entry = client.get(f"/tools/{KEY}").json()
    listed = next(t for t in client.get("/tools").json() if t["key"] == KEY)
    described = describe_over_mcp(client)
    assert entry == listed == described
    assert constraints_of(entry) == CONSTRAINTS
    assert entry["annotations"] == ANNOTATIONS
    assert entry["keywords"] == ["logrotate", "compress"]

    doc = client.get("/openapi.json").json()
    operation = doc["paths"][f"/tools/{KEY}"]["post"]
    assert operation["x-toolrun-annotations"] == ANNOTATIONS
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
    props = schema["properties"]
    assert schema["required"] == ["service"] and schema["additionalProperties"] is False
    assert props["service"] == {
        "type": "string",
        "description": "Service name.",
        "pattern": "^(?:[a-z][a-z0-9-]*)$",
        "maxLength": 40,
    }
    assert props["keep"] == {"type": "integer", "default": 7, "minimum": 1, "maximum": 90}
    assert props["level"] == {"type": "string", "default": "info", "enum": ["debug", "info", "warn"]}
    assert props["tags"] == {"type": "array", "default": [], "items": {"pattern": "^(?:[a-z]+)$"}, "maxItems": 5}
    # What the schema accepts, the tool accepts; what it refuses, the tool refuses.
    good = {"service": "web-1", "keep": 3, "level": "warn", "tags": ["a", "b"]}
    jsonschema.validate(good, schema)
    assert client.post(f"/tools/{KEY}", json=good).text == "web-1 3 warn a b\n"
    for bad in ({"service": "Web"}, {"service": "w", "keep": 0}, {"service": "w", "level": "loud"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
        assert client.post(f"/tools/{KEY}", json=bad).status_code == 400


def test_an_anonymous_openapi_document_names_no_hidden_tool(client: TestClient) -> None:
    text = client.get("/openapi.json").text
    assert "finance.secret_tool" not in text
    assert f"/tools/{KEY}" in json.loads(text)["paths"]


def test_direct_mode_sends_the_hints_as_mcp_tool_annotations(client: TestClient, tmp_path: Path) -> None:
    service = client.app.app.state.parts.service  # type: ignore[attr-defined]
    door = McpDoor(service, lambda ctx: Identity(), direct=True)

    async def main() -> Any:
        async with Client(build_server(door)) as mcp:
            return {t.name: t for t in (await mcp.list_tools()).tools}

    tools = anyio.run(main)
    hints = tools["ops__rotate_logs"].annotations
    assert hints is not None
    assert hints.model_dump(by_alias=True, exclude_none=True) == {
        "title": "Rotate log files",
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
    }
    # the meta-tools carry their own hints (server/mcp/meta.py), not a catalog tool's
    assert tools["execute"].annotations.model_dump(by_alias=True, exclude_none=True) == {
        "readOnlyHint": False,
        "openWorldHint": True,
    }


def test_a_secret_params_default_never_reaches_a_signature_or_a_schema() -> None:
    from dataclasses import dataclass

    from toolrun.models import Param
    from toolrun.paramtypes import describe, json_schema

    @dataclass(frozen=True)
    class SecretParam(Param):  # the `secret: true` of the catalog, whichever module adds the field
        secret: bool = True

    param = SecretParam("token", "str", False, default="hunter2", example="hunter2")
    assert describe(param) == "token: str = ***"
    assert "hunter2" not in json.dumps(json_schema(param))
