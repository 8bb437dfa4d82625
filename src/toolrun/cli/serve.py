"""`toolrun serve` and `toolrun mcp-config`: start a server, or connect an MCP client to one.

The server stack is imported inside `serve` only, so other commands never pay for it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .common import CatalogOpt, app, fail, load_settings, print_err


@app.command()
def serve(
    catalog: CatalogOpt = None,
    host: Annotated[str | None, typer.Option(metavar="ADDRESS", help="Bind address (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8080).")] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Worker processes (default: one per CPU, at most 8; 1 for a single process)."),
    ] = None,
    ui: Annotated[bool | None, typer.Option("--ui/--no-ui", help="Serve the browser UI at /ui.")] = None,
    debug: Annotated[bool | None, typer.Option("--debug/--no-debug", help="Tracebacks in error bodies.")] = None,
    rate_limit: Annotated[
        bool | None, typer.Option("--rate-limit/--no-rate-limit", help="Per (user, tool) rate limits.")
    ] = None,
    log_level: Annotated[str | None, typer.Option(metavar="LEVEL", help="debug, info, warning or error.")] = None,
    stdio: Annotated[
        bool, typer.Option("--stdio", help="Speak MCP over stdin/stdout (for desktop agents) instead of HTTP.")
    ] = False,
    mcp_direct: Annotated[
        bool | None, typer.Option("--mcp-direct/--no-mcp-direct", help="MCP also lists each tool as its own tool.")
    ] = None,
    audit_log: Annotated[
        str | None,
        typer.Option(metavar="FILE", help="Audit trail of tool calls (JSON lines): a file path, or - for stderr."),
    ] = None,
) -> None:
    """Serve the catalog over HTTP (REST, MCP at /mcp, /metrics, /search, /ui) on one host and port."""
    from ..errors import ToolrunError

    flags: dict[str, Any] = {
        "host": host,
        "port": port,
        "workers": workers,
        "ui_enabled": ui,
        "debug": debug,
        "rate_limit.enabled": rate_limit,
        "log_level": log_level,
        "mcp_direct": mcp_direct,
        "audit_log": audit_log,
    }
    try:
        settings = load_settings(flags)
        if stdio:
            from ..server.mcp.stdio_server import serve_stdio

            serve_stdio(settings, catalog)
            return
        from ..server.run import serve as run_server

        run_server(settings, catalog)
    except ToolrunError as exc:
        fail(exc)


@app.command("mcp-config")
def mcp_config(
    client: Annotated[
        str,
        typer.Option(
            "--client",
            metavar="CLIENT",
            help="claude-desktop, claude-code, vscode, cursor, windsurf, gemini-cli or codex.",
        ),
    ] = "claude-desktop",
    catalog: CatalogOpt = None,
    url: Annotated[
        str | None, typer.Option(help="Connect to a running `toolrun serve` at this /mcp URL instead of stdio.")
    ] = None,
    api_key: Annotated[
        bool, typer.Option("--api-key", help="Add a placeholder for an API key (TOOLRUN_API_KEY, or X-API-Key).")
    ] = False,
    name: Annotated[str, typer.Option(help="The server's name in the client.")] = "toolrun",
) -> None:
    """Print the snippet that connects an MCP client to toolrun (absolute paths): Claude Desktop, Claude Code,
    VS Code, Cursor, Windsurf, Gemini CLI or Codex CLI."""

    from ..errors import ToolrunError
    from ..service import catalog_paths
    from .mcpconfig import WHERE, client_name, find_toolrun, mcp_config_snippet

    try:
        client = client_name(client)
    except ValueError as exc:
        print_err(f"toolrun: {exc}")
        raise typer.Exit(2) from None
    try:
        paths = [] if url else catalog_paths(catalog, load_settings())
    except ToolrunError as exc:
        fail(exc)
    for path in paths:
        if not Path(path).exists():
            print_err(f"toolrun: warning: catalog {path!r} does not exist (yet)")
    home = os.environ.get("TOOLRUN_HOME")
    env = {"TOOLRUN_HOME": os.path.abspath(home)} if home and not url else None
    try:
        text = mcp_config_snippet(client, paths, find_toolrun(), name=name, url=url, api_key=api_key, env=env)
    except ValueError as exc:
        print_err(f"toolrun: {exc}")
        raise typer.Exit(2) from None
    sys.stdout.write(text)
    print_err(WHERE[client])
