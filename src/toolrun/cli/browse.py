"""`toolrun list`, `toolrun describe` and `toolrun search`: on the local catalog, or on a server (--url)."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from .client import open_client
from .common import CatalogOpt, JsonOpt, app, fail, print_err, print_json

if TYPE_CHECKING:
    from ..models import Param, ToolSpec

T = TypeVar("T")


@app.command("list")
def list_tools(
    catalog: CatalogOpt = None,
    group: Annotated[
        str | None, typer.Option("--group", "-g", metavar="GROUP", help="Only tools tagged with this group.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the catalog's tools: key, groups and the first line of each description."""
    client = open_client(catalog)
    tools = _answer(lambda: client.list(group))
    if as_json:  # the entries as the door sends them (GET /tools)
        print_json(_answer(lambda: [client.entry(t.key) for t in tools]))
        return
    _print_table(tools)
    if not tools:
        print_err("no tools" + (f" in group {group!r}" if group else ""))


def _answer(ask: Callable[[], T]) -> T:
    """The client's answer; its errors (a catalog that does not load, a server that cannot be reached) exit."""
    from ..errors import ToolrunError

    try:
        return ask()
    except ToolrunError as exc:
        fail(exc)


def _print_table(tools: list[ToolSpec], scores: list[Any] | None = None) -> None:
    """key, groups and the plain-text summary of each tool, one row each (and its score first, when given)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ..formatting import plain

    # Keys and groups are never cut; only the description gives way on a narrow terminal, and a
    # pipe gets whole lines (rich would otherwise assume 80 columns).
    table = Table(box=None, pad_edge=False, header_style="bold")
    if scores is not None:
        table.add_column("score", no_wrap=True, justify="right")
    table.add_column("key", style="cyan", no_wrap=True, min_width=max((len(t.key) for t in tools), default=3))
    groups = [", ".join(t.groups) for t in tools]
    table.add_column("groups", no_wrap=True, min_width=max((len(g) for g in groups), default=6))
    table.add_column("description", no_wrap=True, overflow="ellipsis")
    for i, (tool, tags) in enumerate(zip(tools, groups, strict=True)):
        row = [escape(tool.key), escape(tags), escape(_mark(tool) + plain(tool.summary))]
        table.add_row(*([f"{scores[i]:.2f}"] if scores is not None else []), *row)
    Console(width=None if sys.stdout.isatty() else 100_000).print(table)


def explain_line(why: dict[str, Any]) -> str:
    """One line of `search --explain`: the words matched (and how), the semantic similarity, the scores."""
    words = ", ".join(
        m["word"] if m["how"] == "itself" else f"{m['word']}->{m['matched']} ({m['how']})"
        for m in why.get("matched", [])
    )
    parts = [f"words: {words or 'none'}", f"lexical {why.get('lexical', 0):.2f}"]
    if "similarity" in why:
        similarity = why["similarity"]
        parts.append("similarity " + (f"{similarity:.3f}" if similarity is not None else "- (not among the nearest)"))
        weight = why.get("semantic_weight")
        parts.append(f"fusion: {why.get('fusion')}" + (f", semantic weight {weight:g}" if weight is not None else ""))
    parts.append(f"score {why.get('score', 0):.2f}")
    return "; ".join(parts)


def _mark(tool: ToolSpec) -> str:
    """A list row's word on how the tool runs: `[approval: oncall]`, `[async]`, or nothing."""
    if tool.approval:
        return f"[approval: {', '.join(tool.approvers) or 'admin'}] "
    return "[async] " if tool.run_async else ""


@app.command()
def search(
    query: Annotated[list[str], typer.Argument(help="Words to look for in keys, groups, descriptions, params.")],
    catalog: CatalogOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Results per page (1-100).")] = 10,
    offset: Annotated[int, typer.Option("--offset", help="Skip this many results (the next page).")] = 0,
    min_score: Annotated[
        float | None,
        typer.Option("--min-score", help="Only hits scoring this much or more, 0 to 1 (default 0.25; 0: every match)."),
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show why each tool ranked where it did: words, similarity, scores.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Search the tools (ranked, as GET /search): one row per match, best first, with its score (0 to 1)."""
    from ..errors import UsageError

    text = " ".join(query)
    if not 1 <= limit <= 100 or offset < 0:
        fail(UsageError("--limit must be between 1 and 100, and --offset 0 or more"))
    if min_score is not None and not 0 <= min_score <= 1:
        fail(UsageError(f"--min-score must be a number from 0 to 1, not {min_score:g}"))
    client = open_client(catalog)
    page = _answer(lambda: client.search(text, offset, limit, min_score, explain))
    tools = page.pop("tools")
    if as_json:
        print_json(page)
        return
    items = page.get("items") or []
    scores = [item.get("score") for item in items] if items and "score" in items[0] else None
    _print_table(tools, scores)
    if explain:
        for item in items:
            print(f"{item['key']}: {explain_line(item.get('explain') or {})}")
    none = f"no good match (no tool scores {page.get('min_score', 0):g} or more)" if page.get("min_score") else ""
    shown = f"{page['offset'] + 1}-{page['offset'] + len(tools)} of {page['total']}" if tools else none or "no matches"
    more = f"; next page: --offset {page['next_offset']}" if page.get("has_more") else ""
    print_err(f"{shown} for {text!r}{more}")


@app.command()
def describe(
    key: Annotated[str, typer.Argument(help="Tool key, e.g. ops.disk_usage.")],
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a tool: signature, hints, return type, description, each param with its constraints, an example."""
    client = open_client(catalog)
    tool = _answer(lambda: client.describe(key))
    entry = _answer(lambda: client.entry(key))  # the door's word, e.g. whether its host can enforce the sandbox
    if as_json:
        print_json(entry)
        return
    _print_tool(tool, entry.get("sandbox"))


def _print_tool(tool: ToolSpec, sandbox: dict[str, Any] | None = None) -> None:
    """The signature line of MCP's `describe_tools` (constraints in brackets) with the return type,
    then groups, hints, the return type in words, the description, one block per param, the example."""
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.markup import escape

    from ..formatting import annotation_words, job_words, return_words
    from ..paramtypes import signature

    console = Console()
    console.print(f"[bold cyan]{escape(signature(tool))} -> {escape(tool.return_type)}[/]", soft_wrap=True)
    console.print(f"groups: {escape(', '.join(tool.groups))}    kind: {tool.kind}")
    if tool.annotations.get("title"):
        console.print(f"title: {escape(str(tool.annotations['title']))}", soft_wrap=True)
    hints = annotation_words(tool)
    if hints:
        console.print(f"hints: {hints}")
    runs = job_words(tool)
    if runs:
        console.print(f"runs: {escape(runs)}", soft_wrap=True, highlight=False)
    console.print(f"returns: {escape(tool.return_type)}", soft_wrap=True)
    words = return_words(tool.return_type, tool.typed_output)
    if words:
        for line in textwrap.wrap(words, 96):
            console.print(f"  {escape(line)}", soft_wrap=True, highlight=False)
    if sandbox is not None:  # the tool entry's: the profile, and whether the serving host can enforce it
        from ..exec.sandbox import describe_text

        console.print(f"sandbox: {escape(describe_text(sandbox))}", soft_wrap=True)
    if tool.description.strip():
        console.print()
        console.print(Markdown(tool.description))
    if tool.params:
        console.print()
        console.print("params:")
        for p in tool.params:
            for line in _param_lines(p):
                console.print(escape(line), soft_wrap=True, highlight=False)
    console.print()
    console.print(f"example: {escape(tool.example)}", soft_wrap=True)


def _param_lines(p: Param) -> list[str]:
    """`  name: type, required` (or `, default 5` / `, optional`), then its description and each rule."""
    from ..paramtypes import rules

    if p.required:
        state = "required"
    elif p.default is None:
        state = "optional"
    else:
        state = "default ***" if p.secret else f"default {json.dumps(p.default, ensure_ascii=False)}"
    head = f"  {p.name}: {p.type}, {state}" + (", secret" if p.secret else "")
    return [head, *(f"    {line}" for line in p.description.strip().splitlines()), *(f"    {r}" for r in rules(p))]
