"""Config snippets that connect an MCP client to toolrun (`toolrun mcp-config`).

    mcp_config_snippet("claude-desktop", ["tools.yaml"], "/home/me/.venv/bin/toolrun")

Pure text (standard library only, no SDK import): every path in the snippet is absolute, since a
desktop client starts the server from a directory of its own choosing. Over stdio the client
starts `toolrun serve --stdio -c <catalog>...`; with `url` the snippet connects to a running
`toolrun serve` at `<url>` (for example http://127.0.0.1:8080/mcp) with an X-API-Key header.

Each client's format is the one its documentation gives: JSON `mcpServers` for Claude Desktop, Cursor
(a remote server's `url`), Windsurf (`serverUrl`) and Gemini CLI (`httpUrl`); `servers` with a `type`
for VS Code; a `claude mcp add` command for Claude Code; a TOML `[mcp_servers.NAME]` table for Codex.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CLIENTS = ("claude-desktop", "claude-code", "vscode", "cursor", "windsurf", "gemini-cli", "codex")
ALIASES = {"gemini": "gemini-cli", "codex-cli": "codex", "vs-code": "vscode", "code": "vscode"}
KEY_PLACEHOLDER = "<your toolrun API key>"
KEY_VARIABLE = "TOOLRUN_API_KEY"
VSCODE_KEY_INPUT = "toolrun-api-key"
WHERE = {
    "claude-desktop": "Merge into claude_desktop_config.json (Settings > Developer > Edit Config), then restart "
    "Claude Desktop.",
    "claude-code": "Run in a shell (add --scope project to share it through .mcp.json).",
    "vscode": "Save as .vscode/mcp.json in your workspace (or merge into it).",
    "cursor": "Merge into ~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project), then restart Cursor.",
    "windsurf": "Merge into ~/.codeium/windsurf/mcp_config.json (MCP toolbar > Configure), then refresh the servers.",
    "gemini-cli": "Merge into ~/.gemini/settings.json (or .gemini/settings.json in a project), then restart "
    "Gemini CLI.",
    "codex": "Append to ~/.codex/config.toml (or .codex/config.toml in a trusted project), then restart Codex.",
}
# How each JSON client's file names its servers, and the field of a remote server's URL.
_JSON_CLIENTS = {
    "claude-desktop": ("mcpServers", None),
    "cursor": ("mcpServers", "url"),
    "windsurf": ("mcpServers", "serverUrl"),
    "gemini-cli": ("mcpServers", "httpUrl"),
}
# The API key as each client can take it from the environment it runs in, so that it stays out of the file
# (Cursor and Windsurf interpolate `${env:NAME}`, Gemini CLI expands `$NAME` in `env`); else a placeholder.
_KEY_FROM_ENV = {"cursor": "${env:TOOLRUN_API_KEY}", "windsurf": "${env:TOOLRUN_API_KEY}"}


def client_name(client: str) -> str:
    """The canonical name of `client` (aliases: gemini, codex-cli...); ValueError naming the choices."""
    name = ALIASES.get(client.strip().lower(), client.strip().lower())
    if name not in CLIENTS:
        import difflib

        close = difflib.get_close_matches(name, [*CLIENTS, *ALIASES], n=1)
        hint = f"did you mean {ALIASES.get(close[0], close[0])!r}? " if close else ""
        raise ValueError(f"unknown client {client!r}: {hint}use one of {', '.join(CLIENTS)}")
    return name


def find_toolrun(argv0: str | None = None, executable: str | None = None) -> str:
    """The absolute path of the `toolrun` executable that is running (or the one beside Python)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    if argv0 and Path(argv0).name == "toolrun":
        return os.path.abspath(argv0)
    beside = Path(executable).with_name("toolrun")
    if beside.exists():
        return str(beside)
    return shutil.which("toolrun") or "toolrun"


def stdio_args(catalog_paths: Sequence[str | Path]) -> list[str]:
    args = ["serve", "--stdio"]
    for path in catalog_paths:
        args += ["-c", os.path.abspath(os.fspath(path))]
    return args


def mcp_config_snippet(
    client: str,
    catalog_paths: Sequence[str | Path],
    toolrun_path: str | Path,
    *,
    name: str = "toolrun",
    url: str | None = None,
    api_key: bool = False,
    env: Mapping[str, str] | None = None,
) -> str:
    """The snippet for `client` (one of CLIENTS, or an alias), ending with a newline.

    `api_key` adds the key (TOOLRUN_API_KEY over stdio, the X-API-Key header over HTTP): read from the
    client's environment where the client can (Cursor, Windsurf, Gemini CLI's env, Codex's HTTP headers),
    prompted for by VS Code, else a placeholder to replace. `env` adds environment variables to the stdio
    server (for example TOOLRUN_HOME, so it reads the same key store and config as your shell).
    """
    client = client_name(client)
    command = os.path.abspath(os.fspath(toolrun_path))
    args = stdio_args(catalog_paths)
    server_env = dict(env or {})
    if api_key:
        server_env[KEY_VARIABLE] = _stdio_key(client)
    if client == "claude-code":
        return _claude_code(name, url, api_key, command, args, server_env)
    if client == "vscode":
        return _vscode(name, url, api_key, command, args, server_env)
    if client == "codex":
        return _codex(name, url, api_key, command, args, server_env)
    return _json_client(client, name, url, api_key, command, args, server_env)


def _stdio_key(client: str) -> str:
    if client == "vscode":
        return f"${{input:{VSCODE_KEY_INPUT}}}"
    if client == "gemini-cli":
        return f"${KEY_VARIABLE}"
    return _KEY_FROM_ENV.get(client, KEY_PLACEHOLDER)


def _json_client(
    client: str, name: str, url: str | None, api_key: bool, command: str, args: list[str], env: dict[str, str]
) -> str:
    """Claude Desktop, Cursor, Windsurf, Gemini CLI: `{"mcpServers": {name: server}}`, a remote server's URL
    under each client's own field name."""
    section, url_field = _JSON_CLIENTS[client]
    entry: dict[str, Any]
    if url is not None:
        if url_field is None:
            raise ValueError(
                "Claude Desktop's config file starts local servers over stdio; add a remote server under "
                "Settings > Connectors instead, or leave out the URL"
            )
        entry = {url_field: url}
        if api_key:
            entry["headers"] = {"X-API-Key": _KEY_FROM_ENV.get(client, KEY_PLACEHOLDER)}
    else:
        entry = {"command": command, "args": args}
        if env:
            entry["env"] = env
    return json.dumps({section: {name: entry}}, indent=2) + "\n"


def _claude_code(name: str, url: str | None, api_key: bool, command: str, args: list[str], env: dict[str, str]) -> str:
    if url is not None:
        words = ["claude", "mcp", "add", "--transport", "http", name, url]
        if api_key:
            words += ["--header", f"X-API-Key: {KEY_PLACEHOLDER}"]
        return shlex.join(words) + "\n"
    words = ["claude", "mcp", "add", name]
    for var, value in env.items():
        words += ["-e", f"{var}={value}"]
    return shlex.join([*words, "--", command, *args]) + "\n"


def _vscode(name: str, url: str | None, api_key: bool, command: str, args: list[str], env: dict[str, str]) -> str:
    """.vscode/mcp.json: `servers`, each with its `type`; a key is prompted for (an `inputs` entry)."""
    server: dict[str, Any]
    if url is not None:
        server = {"type": "http", "url": url}
        if api_key:
            server["headers"] = {"X-API-Key": f"${{input:{VSCODE_KEY_INPUT}}}"}
    else:
        server = {"type": "stdio", "command": command, "args": args}
        if env:
            server["env"] = env
    document: dict[str, Any] = {"servers": {name: server}}
    if api_key:
        document["inputs"] = [
            {"type": "promptString", "id": VSCODE_KEY_INPUT, "description": "toolrun API key", "password": True}
        ]
    return json.dumps(document, indent=2) + "\n"


def _codex(name: str, url: str | None, api_key: bool, command: str, args: list[str], env: dict[str, str]) -> str:
    """~/.codex/config.toml: one `[mcp_servers.NAME]` table; over HTTP the key header is read from the
    environment Codex runs in (`env_http_headers` maps a header to a variable's name)."""
    lines = [f"[mcp_servers.{_toml_key(name)}]"]
    if url is not None:
        lines.append(f"url = {_toml_string(url)}")
        if api_key:
            lines.append(f"env_http_headers = {{ {_toml_key('X-API-Key')} = {_toml_string(KEY_VARIABLE)} }}")
    else:
        lines.append(f"command = {_toml_string(command)}")
        lines.append(f"args = [{', '.join(_toml_string(a) for a in args)}]")
        if env:
            pairs = ", ".join(f"{_toml_key(k)} = {_toml_string(v)}" for k, v in env.items())
            lines.append(f"env = {{ {pairs} }}")
    return "\n".join(lines) + "\n"


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's (json.dumps never writes `\\/`)."""
    return json.dumps(text)


def _toml_key(key: str) -> str:
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    return key if bare else _toml_string(key)
