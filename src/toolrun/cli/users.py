"""`toolrun users`: list, show, set-groups and delete users (of the SQLite or Redis store).

A user's groups decide what every key of theirs may call, so changing them is a command of its
own (`set-groups`), never a side effect of `keys create`.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from .common import JsonOpt, app, fail, open_access, print_err

users_app = typer.Typer(help="List, show, change the groups of, and delete users.")
app.add_typer(users_app, name="users")


def _user_row(user: Any, records: list[Any], with_keys: bool) -> dict[str, Any]:
    from ..access.apikeys import iso

    mine = [r for r in records if r.username == user.username]
    row: dict[str, Any] = {
        "username": user.username,
        "email": user.email,
        "groups": sorted(user.groups),
        "created_at": iso(user.created_at),
        "active_keys": sum(1 for r in mine if r.state() == "active"),
    }
    if with_keys:
        row["keys"] = [r.details() for r in mine]
    return row


@users_app.command("list")
def users_list(as_json: JsonOpt = False) -> None:
    """List users: name, email, groups, active keys."""
    from ..errors import ToolrunError

    try:
        store = open_access()
        records = store.list_keys()
        rows = [_user_row(u, records, False) for u in store.list_users()]
    except ToolrunError as exc:
        fail(exc)
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for col in ("user", "email", "groups", "active keys"):
        table.add_column(col)
    for row in rows:
        table.add_row(
            escape(row["username"]), escape(row["email"]), escape(", ".join(row["groups"])), str(row["active_keys"])
        )
    Console().print(table)


@users_app.command("show")
def users_show(
    username: Annotated[str, typer.Argument(help="The user.")],
    as_json: JsonOpt = False,
) -> None:
    """One user: groups and every key with its state (active, expired, revoked)."""
    from ..errors import ToolrunError

    try:
        store = open_access()
        user = store.get_user(username)
        if user is None:
            print_err(f"toolrun: no user {username!r}")
            raise typer.Exit(2)
        row = _user_row(user, store.list_keys(), True)
    except ToolrunError as exc:
        fail(exc)
    if as_json:
        sys.stdout.write(json.dumps(row, indent=2) + "\n")
        return
    lines = [
        f"user:    {row['username']}",
        f"email:   {row['email']}",
        f"groups:  {', '.join(row['groups']) or '(none)'}",
        f"created: {row['created_at']}",
        "keys:",
    ]
    for key in row["keys"]:
        until = f", revoked at {key['revoked_at']}" if key["revoked_at"] else ""
        expires = f", expires {key['expires_at']}" if key["expires_at"] else ""
        lines.append(f"  {key['prefix']}  {key['state']}  created {key['created_at']}{expires}{until}")
    sys.stdout.write("\n".join(lines) + "\n")


@users_app.command("set-groups")
def users_set_groups(
    username: Annotated[str, typer.Argument(help="The user.")],
    group: Annotated[
        list[str] | None,
        typer.Option("--group", "-g", metavar="GROUP", help="A group (repeatable); none leaves the user in none."),
    ] = None,
) -> None:
    """Replace a user's groups; every key of theirs follows at once, on every server sharing the store."""
    from ..errors import ToolrunError

    groups = sorted(set(group or []))
    try:
        store = open_access()
        user = store.get_user(username)
        if user is None or not store.set_groups(username, groups):
            print_err(f"toolrun: no user {username!r}")
            raise typer.Exit(2)
    except ToolrunError as exc:
        fail(exc)
    before = ", ".join(sorted(user.groups)) or "(none)"
    print_err(f"{username}: groups {before} -> {', '.join(groups) or '(none)'}")


@users_app.command("delete")
def users_delete(username: Annotated[str, typer.Argument(help="The user.")]) -> None:
    """Delete a user and revoke every key of theirs (the key records stay, revoked, for the record)."""
    from ..errors import ToolrunError

    try:
        revoked = open_access().delete_user(username)
    except ToolrunError as exc:
        fail(exc)
    if revoked is None:
        print_err(f"toolrun: no user {username!r}")
        raise typer.Exit(2)
    print_err(f"deleted user {username}; revoked {revoked} key{'s' if revoked != 1 else ''}")
