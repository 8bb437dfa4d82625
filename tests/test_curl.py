"""curl: tools against a real local HTTP server (spec 2.7)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.http import local_http
from support.servers import free_port
from toolrun import catalog
from toolrun.models import Identity
from toolrun.service import ToolService


class Echo(BaseHTTPRequestHandler):
    """Answers every request with its method, path, headers and body as JSON."""

    def reply(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8")
        payload = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = reply

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    require_binary("curl")
    with local_http(Echo) as url:
        yield url


def service_for(tmp_path: Path, tools_yaml: str, environ: dict[str, str] | None = None) -> ToolService:
    path = write_catalog(tmp_path, "version: 1\ngroup: web\ntools:\n" + tools_yaml)
    return ToolService(catalog.load([path], environ or {}), environ=environ or {})


def call(service: ToolService, key: str, args: dict[str, Any]) -> Any:
    return asyncio.run(service.call(Identity.operator(), key, args)).value


GET_TOOL = """
  - name: get
    curl: "-H 'X-Test: yes' {{ url | quote }}"
    params:
      - {name: url, type: str}
"""


def test_a_curl_tool_runs_curl_silently_to_stdout_followed_by_its_value(tmp_path: Path, server: str) -> None:
    service = service_for(tmp_path, GET_TOOL)
    url = f"{server}/hello?x=1"

    assert service.catalog.tools["web.get"].source == (
        "curl -sS -o - --proto =http,https -H 'X-Test: yes' {{ url | quote }}"
    )
    assert service.plan(Identity.operator(), "web.get", {"url": url})["command"] == (
        f"curl -sS -o - --proto =http,https -H 'X-Test: yes' '{url}'"
    )
    echoed = json.loads(call(service, "web.get", {"url": url}))
    assert (echoed["method"], echoed["path"], echoed["body"]) == ("GET", "/hello?x=1", "")
    assert echoed["headers"]["x-test"] == "yes"


def test_a_curl_tool_with_stdin_posts_every_param_as_a_json_body(tmp_path: Path, server: str) -> None:
    service = service_for(
        tmp_path,
        """
  - name: post
    stdin: true
    curl: -X POST {{ url | quote }}
    params:
      - {name: url, type: str}
      - {name: msg, type: str}
      - {name: n, type: int}
      - {name: tags, type: list, required: false}
""",
    )
    url = f"{server}/items"

    assert service.catalog.tools["web.post"].source.startswith("curl -sS -o - --proto =http,https --json @- ")
    echoed = json.loads(call(service, "web.post", {"url": url, "msg": 'hi "there" é', "n": "3"}))
    assert echoed["method"] == "POST"
    assert echoed["headers"]["content-type"] == "application/json"
    assert echoed["headers"]["accept"] == "application/json"
    assert json.loads(echoed["body"]) == {"url": url, "msg": 'hi "there" é', "n": 3}  # tags: not provided


def test_method_flags_and_headers_follow_the_prefix_with_templates(tmp_path: Path, server: str) -> None:
    service = service_for(
        tmp_path,
        """
  - name: delete
    curl: -X DELETE -H {{ header | quote }} {{ url | quote }}/{{ id }}
    params:
      - {name: url, type: str}
      - {name: header, type: str}
      - {name: id, type: int}
""",
    )

    echoed = json.loads(call(service, "web.delete", {"url": server, "header": "X-Name: a b; c", "id": 7}))
    assert (echoed["method"], echoed["path"]) == ("DELETE", "/7")
    assert echoed["headers"]["x-name"] == "a b; c"


def test_env_references_are_filled_at_load_time_and_reach_the_request(tmp_path: Path, server: str) -> None:
    service = service_for(
        tmp_path,
        """
  - name: auth
    curl: "-H 'Authorization: Bearer ${API_TOKEN}' {{ url | quote }}"
    params:
      - {name: url, type: str}
""",
        environ={"API_TOKEN": "tok-{{ 7*7 }}", "PATH": "/usr/local/bin:/usr/bin:/bin"},
    )

    echoed = json.loads(call(service, "web.auth", {"url": server}))
    assert echoed["headers"]["authorization"] == "Bearer tok-{{ 7*7 }}"  # inserted as text, never as template


def test_a_failing_curl_returns_the_exit_code_tuple(tmp_path: Path) -> None:
    require_binary("curl")
    port = free_port()  # a port nobody listens on
    service = service_for(tmp_path, GET_TOOL)

    code, out, err = call(service, "web.get", {"url": f"http://127.0.0.1:{port}/"})
    assert (code, out) == (7, "")
    assert err.startswith("curl: (7)") and "127.0.0.1" in err  # curl's own reason (`-sS`), not silence


def test_a_server_that_never_answers_hits_the_tool_timeout(tmp_path: Path) -> None:
    require_binary("curl")
    with socket.socket() as listener:  # accepts connections (backlog) but never replies
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        service = service_for(tmp_path, GET_TOOL.replace("    curl:", "    timeout: 0.5\n    curl:"))

        assert call(service, "web.get", {"url": f"http://127.0.0.1:{port}/"}) == (-1, "", "timeout after 0.5s")
