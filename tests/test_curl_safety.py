"""The curl shorthand against hostile values, with a real curl: protocols and option positions.

`curl:` tools run `curl --proto =http,https` unless the tool's `protocols:` or the
`curl_protocols` setting widen it, so a caller's `file://` or `dict://` URL reaches nothing. A
caller value that can reach curl's option position (no `--` before it) is reported by
validate-catalog, and a value that would start an option (`--version`, `-K file`) is refused
before curl runs.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from support.binaries import require_binary
from support.catalogs import write_catalog
from toolrun.cli import app
from toolrun.errors import ParamError
from toolrun.models import Identity
from toolrun.service import ToolService
from toolrun.settings import Settings

SECRET = "s3cret-token-value"


@pytest.fixture(autouse=True)
def _curl() -> None:
    require_binary("curl")


def service_for(tmp_path: Path, tools_yaml: str, flags: dict[str, Any] | None = None) -> ToolService:
    path = write_catalog(tmp_path, "version: 1\ngroup: web\ntools:\n" + tools_yaml)
    settings = Settings.load(flags=flags or {}, environ={"TOOLRUN_HOME": str(tmp_path / "home")})
    return ToolService.from_paths([str(path)], settings)


def call(service: ToolService, key: str, args: dict[str, Any]) -> Any:
    return asyncio.run(service.call(Identity.operator(), key, args)).value


FETCH = """
  - name: fetch
    curl: --max-time 5 -- {{ url | quote }}
    params:
      - {name: url, type: str}
"""


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secrets.env"
    path.write_text(f"TOKEN={SECRET}\n", encoding="utf-8")
    return path


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A local TCP service recording every connection's first bytes (what `dict://` would reach)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    received.append(conn.recv(4096))
                    conn.sendall(b"220 hello\r\n")
                except OSError:
                    received.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], received
    finally:
        stop.set()
        thread.join(timeout=5)
        sock.close()


# -- protocols ------------------------------------------------------------------------------------


def test_a_file_url_does_not_read_a_local_file(tmp_path: Path, secret_file: Path) -> None:
    service = service_for(tmp_path, FETCH)
    result = call(service, "web.fetch", {"url": f"file://{secret_file}"})

    assert isinstance(result, tuple) and result[0] == 1  # curl: unsupported protocol
    assert SECRET not in str(result)


def test_a_dict_url_never_reaches_a_local_service(tmp_path: Path, listener: tuple[int, list[bytes]]) -> None:
    port, received = listener
    service = service_for(tmp_path, FETCH)
    result = call(service, "web.fetch", {"url": f"dict://127.0.0.1:{port}/info"})

    assert isinstance(result, tuple) and result[0] == 1
    assert received == []


def test_http_still_works(tmp_path: Path, listener: tuple[int, list[bytes]]) -> None:
    port, received = listener
    service = service_for(tmp_path, FETCH)
    call(service, "web.fetch", {"url": f"http://127.0.0.1:{port}/x"})
    assert received and received[0].startswith(b"GET /x HTTP/1.1")


def test_a_tool_can_widen_its_protocols(tmp_path: Path, secret_file: Path) -> None:
    service = service_for(tmp_path, FETCH.replace("    curl:", "    protocols: [https, file]\n    curl:"))
    assert service.catalog.tools["web.fetch"].source.startswith("curl -sS -o - --proto =https,file ")
    assert call(service, "web.fetch", {"url": f"file://{secret_file}"}) == f"TOKEN={SECRET}\n"


def test_the_setting_widens_every_curl_tool(tmp_path: Path, secret_file: Path) -> None:
    service = service_for(tmp_path, FETCH, {"curl_protocols": ["http", "https", "file"]})
    assert call(service, "web.fetch", {"url": f"file://{secret_file}"}) == f"TOKEN={SECRET}\n"


def test_a_bad_protocol_setting_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="curl_protocols"):
        Settings.load(flags={"curl_protocols": ["HTTP; rm"]}, environ={"TOOLRUN_HOME": str(tmp_path)})


# -- option positions -------------------------------------------------------------------------------

NO_DASHDASH = """
  - name: get
    curl: "-H 'X-Test: yes' {{ url | quote }}"
    params:
      - {name: url, type: str}
  - name: raw
    curl: --max-time 5 {{ url }}
    params:
      - {name: url, type: str}
"""


@pytest.mark.parametrize("value", ["--version", "-K/etc/passwd", "-Kfile"])
def test_a_value_that_would_start_an_option_is_refused_before_curl_runs(tmp_path: Path, value: str) -> None:
    service = service_for(tmp_path, NO_DASHDASH)
    with pytest.raises(ParamError, match="read by curl as an option"):
        call(service, "web.get", {"url": value})


def test_an_unquoted_value_cannot_smuggle_an_option_word(tmp_path: Path) -> None:
    service = service_for(tmp_path, NO_DASHDASH)
    with pytest.raises(ParamError, match="read by curl as an option"):
        call(service, "web.raw", {"url": "http://127.0.0.1:9/ -K /etc/passwd"})


def test_an_ordinary_url_in_the_same_spot_runs(tmp_path: Path, listener: tuple[int, list[bytes]]) -> None:
    port, received = listener
    service = service_for(tmp_path, NO_DASHDASH)
    call(service, "web.get", {"url": f"http://127.0.0.1:{port}/ok"})
    assert received and received[0].startswith(b"GET /ok")


def test_after_dashdash_an_option_like_value_is_only_a_url(tmp_path: Path) -> None:
    service = service_for(tmp_path, FETCH)
    assert service.catalog.tools["web.fetch"].option_params == ()
    result = call(service, "web.fetch", {"url": "--version"})
    assert isinstance(result, tuple) and result[0] != 0
    assert "curl 7" not in result[1] and "Protocols:" not in result[1]  # never printed its version


def test_validate_catalog_reports_a_value_at_curls_option_position(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, "version: 1\ngroup: web\ntools:\n" + NO_DASHDASH)
    result = CliRunner().invoke(app, ["validate-catalog", "--strict", str(path)])

    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if "option position" in line]
    assert len(lines) == 2
    assert lines[0].startswith(f"{path}:6:32: web.get: warning: param 'url' can reach curl's option position")
    assert lines[1].startswith(f"{path}:10:27: web.raw: warning: param 'url' can reach curl's option position")
