"""`toolrun serve` and `toolrun keys`: the commands that start or administer a server.

Registered on the main Typer app by cli.py; kept apart so `toolrun list` never imports them.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from .cli import CatalogOpt, JsonOpt, _err, _fail, _settings, app

keys_app = typer.Typer(help="Create, list and revoke API keys (users are created with their first key).")
app.add_typer(keys_app, name="keys")


@app.command()
def serve(
    catalog: CatalogOpt = None,
    host: Annotated[str | None, typer.Option(help="Bind address (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8080).")] = None,
    ui: Annotated[bool | None, typer.Option("--ui/--no-ui", help="Serve the browser UI at /ui.")] = None,
    debug: Annotated[bool | None, typer.Option("--debug/--no-debug", help="Tracebacks in error bodies.")] = None,
    rate_limit: Annotated[
        bool | None, typer.Option("--rate-limit/--no-rate-limit", help="Per (user, tool) rate limits.")
    ] = None,
    log_level: Annotated[str | None, typer.Option(help="debug, info, warning or error.")] = None,
    stdio: Annotated[
        bool, typer.Option("--stdio", help="Speak MCP over stdin/stdout (for desktop agents) instead of HTTP.")
    ] = False,
    mcp_direct: Annotated[
        bool | None, typer.Option("--mcp-direct/--no-mcp-direct", help="MCP also lists each tool as its own tool.")
    ] = None,
) -> None:
    """Serve the catalog over HTTP (REST, MCP at /mcp, /metrics, /search, /ui) on one host and port."""
    from .errors import ToolrunError

    flags: dict[str, Any] = {
        "host": host,
        "port": port,
        "ui_enabled": ui,
        "debug": debug,
        "rate_limit.enabled": rate_limit,
        "log_level": log_level,
        "mcp_direct": mcp_direct,
    }
    try:
        settings = _settings(flags)
        if stdio:
            from .server.run import serve_stdio

            serve_stdio(settings, catalog)
            return
        from .server.run import serve as run_server

        run_server(settings, catalog)
    except ToolrunError as exc:
        _fail(exc)


def _store() -> Any:
    from .server.run import key_store

    return key_store(_settings())


@keys_app.command("create")
def keys_create(
    username: Annotated[str, typer.Argument(help="The user the key belongs to (created if new).")],
    group: Annotated[
        list[str] | None, typer.Option("--group", "-g", help="Group of the user (repeatable); `admin` for admins.")
    ] = None,
    email: Annotated[str, typer.Option(help="The user's email.")] = "",
    expires: Annotated[str | None, typer.Option(help="Lifetime, e.g. 30d, 12h (default: never).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a key and print it once: it is stored hashed and cannot be shown again."""
    from .auth import iso, parse_duration
    from .errors import ToolrunError

    try:
        lifetime = parse_duration(expires) if expires else None
        key, record = _store().create_key(username, group or [], email, lifetime)
    except ToolrunError as exc:
        _fail(exc)
    if as_json:
        sys.stdout.write(
            json.dumps(
                {"key": key, "prefix": record.prefix, "username": username, "expires_at": iso(record.expires_at)}
            )
            + "\n"
        )
        return
    sys.stdout.write(key + "\n")
    _err(
        f"created key {record.prefix} for {username}"
        + (f", expires {iso(record.expires_at)}" if record.expires_at else "")
        + ". It is shown only this once."
    )


@keys_app.command("list")
def keys_list(as_json: JsonOpt = False) -> None:
    """List keys: prefix, user, groups, created, expires, state."""
    from .auth import iso

    store = _store()
    groups = {u.username: list(u.groups) for u in store.list_users()}
    rows = [
        {
            "prefix": r.prefix,
            "username": r.username,
            "groups": groups.get(r.username, []),
            "created_at": iso(r.created_at),
            "expires_at": iso(r.expires_at),
            "state": r.state(),
        }
        for r in store.list_keys()
    ]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for col in ("prefix", "user", "groups", "created", "expires", "state"):
        table.add_column(col)
    for row in rows:
        table.add_row(
            row["prefix"],
            escape(row["username"]),
            escape(", ".join(row["groups"])),
            row["created_at"] or "",
            row["expires_at"] or "never",
            row["state"],
        )
    Console().print(table)


@keys_app.command("revoke")
def keys_revoke(prefix: Annotated[str, typer.Argument(help="The key's prefix (or the whole key).")]) -> None:
    """Revoke a key at once, on every server sharing the store."""
    from .auth import split_key

    prefix = split_key(prefix) or prefix
    if not _store().revoke(prefix):
        _err(f"toolrun: no active key with prefix {prefix!r}")
        raise typer.Exit(2)
    _err(f"revoked key {prefix}")


@app.command("mcp-config")
def mcp_config(
    client: Annotated[str, typer.Option("--client", help="claude-desktop, claude-code or vscode.")] = "claude-desktop",
    catalog: CatalogOpt = None,
    url: Annotated[
        str | None, typer.Option(help="Connect to a running `toolrun serve` at this /mcp URL instead of stdio.")
    ] = None,
    api_key: Annotated[
        bool, typer.Option("--api-key", help="Add a placeholder for an API key (TOOLRUN_API_KEY, or X-API-Key).")
    ] = False,
    name: Annotated[str, typer.Option(help="The server's name in the client.")] = "toolrun",
) -> None:
    """Print the snippet that connects Claude Desktop, Claude Code or VS Code to toolrun (absolute paths)."""
    import os
    from pathlib import Path

    from .errors import ToolrunError
    from .mcpconfig import WHERE, find_toolrun, mcp_config_snippet
    from .service import catalog_paths

    try:
        paths = [] if url else catalog_paths(catalog, _settings())
    except ToolrunError as exc:
        _fail(exc)
    for path in paths:
        if not Path(path).exists():
            _err(f"toolrun: warning: catalog {path!r} does not exist (yet)")
    home = os.environ.get("TOOLRUN_HOME")
    env = {"TOOLRUN_HOME": os.path.abspath(home)} if home and not url else None
    try:
        text = mcp_config_snippet(client, paths, find_toolrun(), name=name, url=url, api_key=api_key, env=env)
    except ValueError as exc:
        _err(f"toolrun: {exc}")
        raise typer.Exit(2) from None
    sys.stdout.write(text)
    _err(WHERE[client])
