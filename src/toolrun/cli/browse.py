"""`toolrun list` and `toolrun describe`."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from .common import CatalogOpt, JsonOpt, _err, _fail, _operator, _print_json, _service, app


@app.command("list")
def list_tools(
    catalog: CatalogOpt = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only tools tagged with this group.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the catalog's tools: key, groups and the first line of each description."""
    service = _service(catalog)
    tools = service.list(_operator(), group)
    if as_json:
        _print_json([t.entry() for t in tools])
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # Keys and groups are never cut; only the description gives way on a narrow terminal, and a
    # pipe gets whole lines (rich would otherwise assume 80 columns).
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("key", style="cyan", no_wrap=True, min_width=max((len(t.key) for t in tools), default=3))
    groups = [", ".join(t.groups) for t in tools]
    table.add_column("groups", no_wrap=True, min_width=max((len(g) for g in groups), default=6))
    table.add_column("description", no_wrap=True, overflow="ellipsis")
    for tool, tags in zip(tools, groups, strict=True):
        table.add_row(escape(tool.key), escape(tags), escape(tool.summary))
    Console(width=None if sys.stdout.isatty() else 100_000).print(table)
    if not tools:
        _err("no tools" + (f" in group {group!r}" if group else ""))


@app.command()
def describe(
    key: Annotated[str, typer.Argument(help="Tool key, e.g. ops.disk_usage.")],
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a tool: signature, params, return type, description and an example call."""
    from ..errors import ToolrunError
    from ..formatting import signature

    service = _service(catalog)
    try:
        tool = service.describe(_operator(), key)
    except ToolrunError as exc:
        _fail(exc)
    if as_json:
        _print_json(tool.entry())
        return
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    console.print(f"[bold cyan]{escape(signature(tool))}[/]", soft_wrap=True)
    console.print(
        f"groups: {escape(', '.join(tool.groups))}    kind: {tool.kind}    returns: {escape(tool.return_type)}"
    )
    if tool.description.strip():
        console.print()
        console.print(Markdown(tool.description))
    if tool.params:
        table = Table(header_style="bold")
        for col in ("param", "type", "required", "default", "description"):
            table.add_column(col)
        for p in tool.params:
            default = "" if p.default is None else json.dumps(p.default, ensure_ascii=False)
            table.add_row(escape(p.name), p.type, "yes" if p.required else "no", escape(default), escape(p.description))
        console.print()
        console.print(table)
    console.print()
    console.print(f"example: {escape(tool.example)}", soft_wrap=True)
