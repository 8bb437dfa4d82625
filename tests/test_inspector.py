"""The MCP Inspector CLI (npm `@modelcontextprotocol/inspector`) against both transports.

A third-party client: `toolrun serve --stdio` launched by the Inspector, and `toolrun serve` at
/mcp over loopback HTTP in both protocol eras. The package is installed once with npm into the
pytest cache (`.pytest_cache/d/`), so only the first run downloads it. Needs Node and npm (CI
installs them; locally the tests skip without them). Each Inspector run gets its own HOME, so
nothing is written to the user's `~/.mcp-inspector`.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.binaries import require_binary
from support.keys import mint_key
from support.mcp import CATALOG, META_TOOLS, OPS_KEYS, ServeProcess
from support.servers import TOOLRUN

INSPECTOR_VERSION = "2.12.0"
PACKAGE = f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}"


@pytest.fixture(scope="session")
def inspector(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Inspector's executable, installed with npm into the pytest cache on first use."""
    require_binary("node")
    npm = require_binary("npm")
    cache = getattr(request.config, "cache", None)
    prefix = cache.mkdir(f"mcp-inspector-{INSPECTOR_VERSION}") if cache else tmp_path_factory.mktemp("inspector")
    executable = Path(prefix) / "node_modules" / ".bin" / "mcp-inspector"
    # One test process at a time installs (`make test` runs these tests on several workers: two npm installs into
    # one folder break each other, ENOENT and ENOTEMPTY).
    with open(Path(prefix) / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _install(npm, Path(prefix), executable)
    return executable


def _install(npm: str, prefix: Path, executable: Path) -> None:
    if not executable.exists():
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error", PACKAGE],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not executable.exists():
            message = f"npm install {PACKAGE} failed ({done.returncode}): {done.stderr[-2000:]}"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)  # e.g. no network on a developer machine


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@dataclass
class Inspector:
    executable: Path
    home: Path  # HOME of the Inspector process and TOOLRUN_HOME of the servers

    def run(self, target: Sequence[str], *args: str) -> Run:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home / "inspector-home"),
            "NO_COLOR": "1",
        }
        done = subprocess.run(
            [str(self.executable), "--cli", *target, "--format", "json", *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            start_new_session=True,  # the Inspector signals its process group when it is done
        )
        return Run(done.returncode, done.stdout, done.stderr)

    def stdio(self, *args: str) -> Run:
        target = ["-e", f"TOOLRUN_HOME={self.home / 'toolrun-home'}", TOOLRUN, "serve", "--stdio", "-c", str(CATALOG)]
        return self.run(target, *args)


@pytest.fixture(scope="module")
def tool(inspector: Path, tmp_path_factory: pytest.TempPathFactory) -> Inspector:
    home = tmp_path_factory.mktemp("inspector-run")
    (home / "inspector-home").mkdir()
    return Inspector(inspector, home)


@dataclass
class Http:
    server: ServeProcess
    olga: str


@pytest.fixture(scope="module")
def http(tool: Inspector) -> Iterator[Http]:
    home = tool.home / "toolrun-home"
    olga = mint_key(home, "olga", ["ops"])
    with ServeProcess(home, tool.home / "serve.log") as server:
        yield Http(server, olga)


def result_text(run: Run) -> str:
    content = run.json()["result"]["content"]
    assert len(content) == 1
    return str(content[0]["text"])


# -- stdio ------------------------------------------------------------------------------------------


def test_the_inspector_lists_the_meta_tools_of_a_stdio_server(tool: Inspector) -> None:
    run = tool.stdio("--method", "tools/list")
    assert run.returncode == 0, run.stderr
    tools = run.json()["result"]["tools"]
    assert [t["name"] for t in tools] == META_TOOLS
    assert all(t["inputSchema"]["type"] == "object" for t in tools)


def test_the_inspector_calls_execute_over_stdio_passing_the_arguments_object_as_json(tool: Inspector) -> None:
    run = tool.stdio(
        "--method", "tools/call", "--tool-name", "execute", "--tool-arg", "key=pub.echo", 'arguments={"msg": "hi"}'
    )
    assert run.returncode == 0, run.stderr
    assert result_text(run) == "hi"
    assert run.json()["result"]["isError"] is False
    assert run.json()["result"]["structuredContent"]["stdout"] == "hi"


# -- HTTP -------------------------------------------------------------------------------------------


def test_the_inspector_lists_tools_and_calls_whoami_over_http_with_a_key(tool: Inspector, http: Http) -> None:
    target = [http.server.mcp_url, "--transport", "http", "--header", f"X-API-Key: {http.olga}"]
    listed = tool.run(target, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in listed.json()["result"]["tools"]] == META_TOOLS
    whoami = tool.run(target, "--method", "tools/call", "--tool-name", "whoami")
    assert whoami.returncode == 0, whoami.stderr
    assert whoami.json()["result"]["structuredContent"]["username"] == "olga"
    assert whoami.json()["result"]["structuredContent"]["tools"] == OPS_KEYS


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_inspector_calls_execute_over_http_in_both_protocol_eras(tool: Inspector, http: Http, era: str) -> None:
    run = tool.run(
        [http.server.mcp_url, "--transport", "http", "--header", f"X-API-Key: {http.olga}"],
        "--protocol-era",
        era,
        "--method",
        "tools/call",
        "--tool-name",
        "execute",
        "--tool-args-json",
        json.dumps({"key": "ops.restart", "arguments": {"service": era}}),
    )
    assert run.returncode == 0, run.stderr
    assert result_text(run) == f"restarted {era}"
    assert run.json()["result"]["structuredContent"]["returncode"] == 0


def test_the_inspector_reports_a_hidden_tool_as_a_tool_error_for_an_anonymous_caller(
    tool: Inspector, http: Http
) -> None:
    run = tool.run(
        [http.server.mcp_url, "--transport", "http"],
        "--method",
        "tools/call",
        "--tool-name",
        "execute",
        "--tool-arg",
        "key=ops.restart",
        'arguments={"service": "db"}',
    )
    assert run.returncode != 0
    assert run.json()["result"]["isError"] is True
    assert result_text(run).startswith("No tool 'ops.restart' is available to you.")


def test_the_inspector_cannot_connect_with_an_invalid_key(tool: Inspector, http: Http) -> None:
    run = tool.run(
        [http.server.mcp_url, "--transport", "http", "--header", "X-API-Key: trk_nope"],
        "--stored-auth-only",
        "--method",
        "tools/list",
    )
    assert run.returncode != 0
    assert run.stdout == ""
    assert "auth" in run.stderr
