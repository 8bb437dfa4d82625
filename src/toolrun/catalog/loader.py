"""One catalog file, start to end: read, parse, substitute, validate, build.

`load_file` is the one way a file's tools are built from its YAML (the cache, cache.py, calls it for
every file it does not hold).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models import ToolSpec
from .build import build
from .loadcontext import LoadContext, LoadResult
from .options import LoadOptions
from .parse import key_of, parse
from .positions import Locator
from .problems import acknowledge, report
from .sandboxes import declare_profiles
from .source import NotACatalogFile, read_catalog
from .substitute import substitute_tool, substitute_tree

if TYPE_CHECKING:
    from .schema import CatalogFile


def load_file(path: Path, environ: Mapping[str, str], options: LoadOptions) -> LoadResult:
    """The tools of the catalog file at `path`, built from its YAML (never from the cache), and every
    problem found; see LoadContext for the rest of the result."""
    ctx = LoadContext(path, environ, options)
    return ctx.result(_load(ctx))


def _load(ctx: LoadContext) -> list[ToolSpec]:
    text = _read_text(ctx)
    if text is None:
        return []
    ctx.locate = Locator(text)
    ctx.has_refs = "${" in text  # most files reference no variable: skip the walk
    ok, data = parse(ctx, text)
    if not ok:
        return []
    if data is None:
        ctx.problem_at((1, 1), "", "catalog file is empty (expected a mapping with `tools:`)", "warning")
        return []
    if not isinstance(data, dict):  # the root was checked on its nodes: a tagged one, `!!set`, is not
        ctx.problem_at((1, 1), "", f"a catalog file is a mapping with `tools:`, not a {type(data).__name__}")
        return []
    head = _head(ctx, data)
    if head is None:
        return []
    tools_raw = data.get("tools")
    if tools_raw is None and head.sandboxes:
        return []  # a file of sandbox profiles only
    if tools_raw is None:
        ctx.problem(("tools",), "", "no `tools:` list in this file", "warning")
        return []
    if not isinstance(tools_raw, list):
        ctx.problem_at(ctx.locate.value(("tools",)), "", "`tools:` must be a list of tool definitions")
        return []
    return _tools(ctx, tools_raw, head)


def _read_text(ctx: LoadContext) -> str | None:
    """The file's text, or None after a problem (not a catalog file, unreadable, not UTF-8)."""
    try:
        raw = read_catalog(ctx.path)
    except NotACatalogFile as exc:
        ctx.problem_at((1, 1), "", str(exc))
        return None
    except OSError as exc:
        ctx.problem_at((1, 1), "", f"cannot read catalog: {exc.strerror or exc}")
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        ctx.problem_at((1, 1), "", f"catalog is not UTF-8 text ({exc.reason} at byte {exc.start})")
        return None


def _head(ctx: LoadContext, data: dict[Any, Any]) -> CatalogFile | None:
    """The file's fields other than `tools:` (substituted, validated); its sandbox profiles declared."""
    from pydantic import ValidationError

    from .schema import CatalogFile

    header = substitute_tree(ctx, {k: v for k, v in data.items() if k != "tools"}, (), "")
    try:
        head = CatalogFile.model_validate(header)
    except ValidationError as exc:
        report(ctx, exc, (), "", CatalogFile, header)
        return None
    declare_profiles(ctx, head)
    return head


def _tools(ctx: LoadContext, tools_raw: list[Any], head: CatalogFile) -> list[ToolSpec]:
    """The ToolSpecs of the entries of `tools:` that have no errors, in order."""
    from pydantic import ValidationError

    from .schema import ToolDef

    specs: list[ToolSpec] = []
    for index, item in enumerate(tools_raw):
        loc = ("tools", index)
        if not isinstance(item, dict):
            ctx.problem_at(ctx.locate.value(loc), "", "a tool definition is a mapping (name, exec/curl/fn, params...)")
            continue
        key = key_of(item, index, head.group)
        before = ctx.errors()
        since = len(ctx.problems)
        item = substitute_tool(ctx, item, loc, key)
        try:
            tool = ToolDef.model_validate(item)
        except ValidationError as exc:
            report(ctx, exc, loc, key, ToolDef, item)
            continue
        spec = build(ctx, tool, head, loc)
        acknowledge(ctx, tool.allow_warnings, since, loc, key)
        if spec is not None and ctx.errors() == before:
            specs.append(spec)
    return specs
