"""`toolrun keys`: create, list, rotate and revoke API keys."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from .common import JsonOpt, app, fail, open_access, print_err

keys_app = typer.Typer(help="Create, list, rotate and revoke API keys (users are created with their first key).")
app.add_typer(keys_app, name="keys")


@keys_app.command("create")
def keys_create(
    username: Annotated[str, typer.Argument(help="The user the key belongs to (created if new).")],
    group: Annotated[
        list[str] | None,
        typer.Option("--group", "-g", metavar="GROUP", help="Group of the user (repeatable); `admin` for admins."),
    ] = None,
    email: Annotated[str, typer.Option(help="The user's email.")] = "",
    expires: Annotated[str | None, typer.Option(help="Lifetime, e.g. 30d, 12h (default: never).")] = None,
    set_groups: Annotated[
        bool,
        typer.Option(
            "--set-groups", help="Replace an existing user's groups with --group (it changes every key they hold)."
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Create a key and print it once: it is stored hashed and cannot be shown again.

    For an existing user, leave out --group to keep their groups; other groups need --set-groups,
    because a user's groups apply to every key they hold."""
    from ..access.apikeys import iso, parse_duration
    from ..errors import ToolrunError

    try:
        lifetime = parse_duration(expires) if expires else None
        key, record = open_access().create_key(username, group or [], email, lifetime, set_groups=set_groups)
    except ToolrunError as exc:
        fail(exc)
    if as_json:
        sys.stdout.write(
            json.dumps(
                {"key": key, "prefix": record.prefix, "username": username, "expires_at": iso(record.expires_at)}
            )
            + "\n"
        )
        return
    sys.stdout.write(key + "\n")
    print_err(
        f"created key {record.prefix} for {username}"
        + (f", expires {iso(record.expires_at)}" if record.expires_at else "")
        + ". It is shown only this once."
    )


@keys_app.command("list")
def keys_list(as_json: JsonOpt = False) -> None:
    """List keys: prefix, user, groups, created, expires, state."""
    from ..errors import ToolrunError

    try:
        rows = open_access().key_rows()
    except ToolrunError as exc:
        fail(exc)
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
    from ..access.apikeys import split_key
    from ..errors import ToolrunError

    prefix = split_key(prefix) or prefix
    try:
        revoked = open_access().revoke(prefix)
    except ToolrunError as exc:
        fail(exc)
    if not revoked:
        print_err(f"toolrun: no active key with prefix {prefix!r}")
        raise typer.Exit(2)
    print_err(f"revoked key {prefix}")


@keys_app.command("rotate")
def keys_rotate(
    prefix: Annotated[str, typer.Argument(help="The prefix (or the whole key) of the key to replace.")],
    grace: Annotated[
        str | None,
        typer.Option(help="Keep the old key working this long, e.g. 10m, 1h (default: revoke it at once)."),
    ] = None,
    expires: Annotated[str | None, typer.Option(help="Lifetime of the new key, e.g. 30d (default: never).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Replace a key: a new key for the same user and groups, printed once; the old one is revoked
    at once or when the grace period ends."""
    from ..access.apikeys import iso, parse_duration, split_key
    from ..errors import ToolrunError

    prefix = split_key(prefix) or prefix
    try:
        seconds = parse_duration(grace) if grace else 0.0
        lifetime = parse_duration(expires) if expires else None
        key, record, until = open_access().rotate(prefix, seconds, lifetime)
    except ToolrunError as exc:
        fail(exc)
    if as_json:
        body = {
            "key": key,
            "prefix": record.prefix,
            "username": record.username,
            "expires_at": iso(record.expires_at),
            "revoked_prefix": prefix,
            "revoked_at": iso(until),
        }
        sys.stdout.write(json.dumps(body) + "\n")
        return
    sys.stdout.write(key + "\n")
    when = f"at {iso(until)}" if seconds > 0 else "now"
    print_err(
        f"created key {record.prefix} for {record.username}; key {prefix} is revoked {when}. Shown only this once."
    )
