"""Config snippets that connect an MCP client to toolrun (`toolrun mcp-config`).

    mcp_config_snippet("claude-desktop", ["tools.yaml"], "/home/me/.venv/bin/toolrun")

Pure text (standard library only, no SDK import): every path in the snippet is absolute, since a
desktop client starts the server from a directory of its own choosing. Over stdio the client
starts `toolrun serve --stdio -c <catalog>...`; with `url` the snippet connects to a running
`toolrun serve` at `<url>` (for example http://127.0.0.1:8080/mcp) with an X-API-Key header.
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

CLIENTS = ("claude-desktop", "claude-code", "vscode")
KEY_PLACEHOLDER = "<your toolrun API key>"
VSCODE_KEY_INPUT = "toolrun-api-key"
WHERE = {
    "claude-desktop": "Merge into claude_desktop_config.json (Settings > Developer > Edit Config), then restart "
    "Claude Desktop.",
    "claude-code": "Run in a shell (add --scope project to share it through .mcp.json).",
    "vscode": "Save as .vscode/mcp.json in your workspace (or merge into it).",
}


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
    """The snippet for `client` (one of CLIENTS), ending with a newline.

    `api_key` adds a placeholder for a key (TOOLRUN_API_KEY over stdio, the X-API-Key header over
    HTTP; VS Code prompts for it instead); `env` adds environment variables to the stdio server
    (for example TOOLRUN_HOME, so it reads the same key store and config as your shell).
    """
    if client not in CLIENTS:
        raise ValueError(f"unknown client {client!r}: use one of {', '.join(CLIENTS)}")
    command = os.path.abspath(os.fspath(toolrun_path))
    args = stdio_args(catalog_paths)
    server_env = dict(env or {})
    if api_key:
        server_env["TOOLRUN_API_KEY"] = f"${{input:{VSCODE_KEY_INPUT}}}" if client == "vscode" else KEY_PLACEHOLDER

    if client == "claude-desktop":
        if url is not None:
            raise ValueError(
                "Claude Desktop's config file starts local servers over stdio; add a remote server under "
                "Settings > Connectors instead, or leave out the URL"
            )
        entry: dict[str, Any] = {"command": command, "args": args}
        if server_env:
            entry["env"] = server_env
        return json.dumps({"mcpServers": {name: entry}}, indent=2) + "\n"

    if client == "claude-code":
        if url is not None:
            words = ["claude", "mcp", "add", "--transport", "http", name, url]
            if api_key:
                words += ["--header", f"X-API-Key: {KEY_PLACEHOLDER}"]
            return shlex.join(words) + "\n"
        words = ["claude", "mcp", "add", name]
        for var, value in server_env.items():
            words += ["-e", f"{var}={value}"]
        return shlex.join([*words, "--", command, *args]) + "\n"

    # vscode: .vscode/mcp.json
    server: dict[str, Any]
    if url is not None:
        server = {"type": "http", "url": url}
        if api_key:
            server["headers"] = {"X-API-Key": f"${{input:{VSCODE_KEY_INPUT}}}"}
    else:
        server = {"type": "stdio", "command": command, "args": args}
        if server_env:
            server["env"] = server_env
    document: dict[str, Any] = {"servers": {name: server}}
    if api_key:
        document["inputs"] = [
            {"type": "promptString", "id": VSCODE_KEY_INPUT, "description": "toolrun API key", "password": True}
        ]
    return json.dumps(document, indent=2) + "\n"
