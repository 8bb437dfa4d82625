"""`toolrun mcp-config --client X` for each client with a documented format, read back the way that client
reads its file, then used: the stdio server it describes starts and answers, and the HTTP entry reaches a
real `toolrun serve` with the key.

The formats, as each client documents them:

    claude-desktop  claude_desktop_config.json  {"mcpServers": {NAME: {command, args, env}}}  (no remote)
    claude-code     a shell command             claude mcp add [-e K=V] NAME -- CMD ARGS / --transport http
    vscode          .vscode/mcp.json            {"servers": {NAME: {type: stdio|http, ...}}, "inputs": [...]}
    cursor          ~/.cursor/mcp.json          {"mcpServers": {NAME: {command, args, env} | {url, headers}}}
    windsurf        mcp_config.json             {"mcpServers": {NAME: {command, args, env} | {serverUrl, headers}}}
    gemini-cli      ~/.gemini/settings.json     {"mcpServers": {NAME: {command, args, env} | {httpUrl, headers}}}
    codex           ~/.codex/config.toml        [mcp_servers.NAME] command, args, env | url, env_http_headers
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.keys import mint_key
from support.mcp import CATALOG, OPS_KEYS, ServeProcess, mcp_http
from support.servers import TOOLRUN, clean_env, toolrun_cli
from toolrun.cli.mcpconfig import CLIENTS, KEY_PLACEHOLDER, mcp_config_snippet

HTTP_CLIENTS = ["claude-code", "vscode", "cursor", "windsurf", "gemini-cli", "codex"]


@dataclass
class Stdio:
    command: str
    args: list[str]
    env: dict[str, str]


def read_stdio(client: str, snippet: str) -> Stdio:
    """The stdio server of a snippet, read as `client` reads its own format (and nothing else allowed)."""
    if client == "claude-code":
        words = shlex.split(snippet)
        assert words[:4] == ["claude", "mcp", "add", "toolrun"]
        split = words.index("--")
        env = dict(w.split("=", 1) for w in words[4:split] if w != "-e")
        return Stdio(words[split + 1], words[split + 2 :], env)
    if client == "codex":
        server = tomllib.loads(snippet)["mcp_servers"]["toolrun"]
        assert set(server) <= {"command", "args", "env"}
        return Stdio(server["command"], server["args"], server.get("env", {}))
    document = json.loads(snippet)
    if client == "vscode":
        server = document["servers"]["toolrun"]
        assert server["type"] == "stdio"
        server = {k: v for k, v in server.items() if k != "type"}
    else:
        assert set(document) == {"mcpServers"}
        server = document["mcpServers"]["toolrun"]
    assert set(server) <= {"command", "args", "env"}
    return Stdio(server["command"], server["args"], server.get("env", {}))


def read_http(client: str, snippet: str) -> tuple[str, dict[str, str]]:
    """(url, headers) of a snippet's remote server, read as `client` reads its format."""
    if client == "claude-code":
        words = shlex.split(snippet)
        assert words[:6] == ["claude", "mcp", "add", "--transport", "http", "toolrun"]
        headers = dict(h.split(": ", 1) for h in words[words.index("--header") + 1 :: 2])
        return words[6], headers
    if client == "codex":
        server = tomllib.loads(snippet)["mcp_servers"]["toolrun"]
        assert set(server) == {"url", "env_http_headers"}
        return server["url"], {name: f"${{env:{var}}}" for name, var in server["env_http_headers"].items()}
    document = json.loads(snippet)
    if client == "vscode":
        server = document["servers"]["toolrun"]
        assert server["type"] == "http"
        return server["url"], server["headers"]
    field = {"cursor": "url", "windsurf": "serverUrl", "gemini-cli": "httpUrl"}[client]
    server = document["mcpServers"]["toolrun"]
    assert set(server) == {field, "headers"}
    return server[field], server["headers"]


def resolve(value: str, key: str) -> str:
    """What the client puts in place of the key reference: `${env:V}`, `$V`, VS Code's prompt, a placeholder."""
    value = value.replace(KEY_PLACEHOLDER, key).replace("${input:toolrun-api-key}", key)
    return re.sub(r"\$\{env:TOOLRUN_API_KEY\}|\$TOOLRUN_API_KEY\b", key, value)


def test_every_client_has_a_snippet_and_a_where_line() -> None:
    from toolrun.cli.mcpconfig import WHERE

    assert set(CLIENTS) == set(WHERE) and len(CLIENTS) == 7


@pytest.mark.parametrize("client", CLIENTS)
def test_the_stdio_snippet_starts_a_server_that_answers_as_the_keys_user(client: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    key = mint_key(home, "olga", ["ops"], email="olga@example.com")
    snippet = mcp_config_snippet(client, [CATALOG], TOOLRUN, api_key=True, env={"TOOLRUN_HOME": str(home)})
    server = read_stdio(client, snippet)
    assert server.command == TOOLRUN and server.args == ["serve", "--stdio", "-c", str(CATALOG)]
    env = {k: resolve(v, key) for k, v in server.env.items()}
    assert env == {"TOOLRUN_HOME": str(home), "TOOLRUN_API_KEY": key}

    async def main() -> Any:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=server.command, args=server.args, env=env)
        with (tmp_path / "err.txt").open("w") as err:
            async with Client(stdio_client(params, errlog=err)) as session:
                return (await session.call_tool("whoami", {})).structured_content

    assert anyio.run(main)["username"] == "olga"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, str]]:
    base = tmp_path_factory.mktemp("clients")
    key = mint_key(base / "home", "olga", ["ops"], email="olga@example.com")
    with ServeProcess(base / "home", base / "serve.log") as server:
        yield server, key


@pytest.mark.parametrize("client", HTTP_CLIENTS)
def test_the_http_snippet_reaches_a_running_server_with_the_key(client: str, served: tuple[ServeProcess, str]) -> None:
    server, key = served
    url, headers = read_http(client, mcp_config_snippet(client, [], TOOLRUN, url=server.mcp_url, api_key=True))
    assert url == server.mcp_url and set(headers) == {"X-API-Key"}

    async def main() -> Any:
        async with mcp_http(url, "auto", {k: resolve(v, key) for k, v in headers.items()}) as session:
            return (await session.call_tool("whoami", {})).structured_content

    whoami = anyio.run(main)
    assert (whoami["username"], whoami["tools"]) == ("olga", OPS_KEYS)


@pytest.mark.parametrize("client", ["cursor", "windsurf", "codex"])
def test_the_key_stays_out_of_the_file_where_the_client_reads_it_from_the_environment(client: str) -> None:
    snippet = mcp_config_snippet(client, [], TOOLRUN, url="http://h:1/mcp", api_key=True)
    assert KEY_PLACEHOLDER not in snippet and "TOOLRUN_API_KEY" in snippet


def test_the_codex_table_quotes_names_and_paths_toml_needs_quoted() -> None:
    snippet = mcp_config_snippet("codex", ['/my "catalogs"/tools.yaml'], "/v/toolrun", name="my tools")
    server = tomllib.loads(snippet)["mcp_servers"]["my tools"]
    assert server["args"] == ["serve", "--stdio", "-c", '/my "catalogs"/tools.yaml']


def test_the_cli_takes_aliases_and_suggests_the_client_meant(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home")
    done = toolrun_cli("mcp-config", "--client", "gemini", "-c", str(CATALOG), env=env)
    assert done.returncode == 0 and "httpUrl" not in done.stdout and '"mcpServers"' in done.stdout
    assert done.stderr.strip().endswith("then restart Gemini CLI.")
    wrong = toolrun_cli("mcp-config", "--client", "cursr", env=env)
    assert wrong.returncode == 2
    assert wrong.stderr.startswith("toolrun: unknown client 'cursr': did you mean 'cursor'?")
    over_http = toolrun_cli("mcp-config", "--client", "codex-cli", "--url", "http://h:1/mcp", "--api-key", env=env)
    assert tomllib.loads(over_http.stdout)["mcp_servers"]["toolrun"]["url"] == "http://h:1/mcp"
