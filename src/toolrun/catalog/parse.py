"""YAML text -> data (libyaml), with duplicate keys found and reported and alias expansion bounded.

Each function takes the file's LoadContext first and records its problems there."""

from __future__ import annotations

import difflib
import functools
from typing import TYPE_CHECKING, Any

from .positions import Locator
from .source import expansion_problem, link_note
from .yamlhints import repair, tool_at

if TYPE_CHECKING:
    import yaml

    from .loadcontext import LoadContext


CATALOG_FIELDS = frozenset({"$schema", "version", "group", "defaults", "sandboxes", "tools"})  # schema.CatalogFile's
_NULL = "tag:yaml.org,2002:null"
_SCALAR_KINDS = {
    "tag:yaml.org,2002:str": "str",
    "tag:yaml.org,2002:int": "int",
    "tag:yaml.org,2002:float": "float",
    "tag:yaml.org,2002:bool": "bool",
    "tag:yaml.org,2002:binary": "bytes",
    "tag:yaml.org,2002:timestamp": "datetime",
}


@functools.cache
def _yaml_loader() -> Any:
    """libyaml's safe loader that notices duplicate mapping keys (YAML itself keeps the last)."""
    import yaml

    class YamlLoader(yaml.CSafeLoader):
        duplicates = False

        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            mapping: dict[Any, Any] = super().construct_mapping(node, deep)
            if len(mapping) != len(node.value):
                self.duplicates = True  # or a `<<` merge: composing the nodes tells them apart
            return mapping

    return YamlLoader


def parse(ctx: LoadContext, text: str, repaired: tuple[int, ...] = ()) -> tuple[bool, Any]:
    """The file's data; after a syntax error in a command (a value `yamlhints.repair` can quote), the
    data of the file with that value quoted, so that its other problems are found too."""
    import yaml

    loader = _yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            data = None
        else:
            # Before anything walks the data: aliases could make it a billion values (see source.py).
            found = expansion_problem(node, len(text))
            if found is not None:
                ctx.problem_at(found[0], "", found[1])
                return False, None
            if not catalog_root(ctx, node):  # decided on the nodes: no constructor error can quote it
                return False, None
            data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        pos = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        cmark = getattr(exc, "context_mark", None)
        if context and cmark is not None and (cmark.line, cmark.column) != (pos[0] - 1, pos[1] - 1):
            context += f" started at line {cmark.line + 1}, column {cmark.column + 1}"
        message = f"YAML syntax error: {what}" + (f" ({context})" if context else "")
        lines = (pos[0] - 1, *((cmark.line,) if cmark is not None else ()))
        if "escape" in what:  # quoting does not mend a bad escape in a quoted value: say what does
            message += ESCAPE_HINT
        fixed = repair(text, lines, skip=repaired) if len(repaired) < 20 and "escape" not in what else None
        key = tool_at(text, fixed[2] if fixed else pos[0] - 1)
        ctx.problem_at(pos, key, message + (fixed[1] if fixed else ""))
        if fixed is None:
            return False, None
        ctx.locate = Locator(fixed[0])  # the same lines: positions of later problems hold
        return parse(ctx, fixed[0], (*repaired, fixed[2]))
    finally:
        loader.dispose()
    if loader.duplicates:
        report_duplicates(ctx, data)
    return True, data


ESCAPE_HINT = (
    "; in a double-quoted value a backslash starts an escape, and `\\u`/`\\U` must name a whole character (a JSON"
    " surrogate pair such as `\\ud83d\\ude80` is not one): write the character itself or `\\U0001F680`, or"
    " single-quote the value (no escapes there)"
)


def catalog_root(ctx: LoadContext, node: yaml.Node) -> bool:
    """Whether the document's root can be a catalog: a mapping with `tools:` or only catalog fields
    (or null: an empty file). Else one error names the file and what it is, never its content: a
    catalog path may lead to another file (a link swapped to a password file)."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        keys = [k.value if isinstance(k, yaml.ScalarNode) else None for k, _ in node.value]
        if "tools" in keys or set(keys) <= CATALOG_FIELDS:
            return True
        not_a_catalog(ctx, node)
        return False
    if node.tag == _NULL:
        return True  # an empty document: a warning, later
    kind = "list" if isinstance(node, yaml.SequenceNode) else _SCALAR_KINDS.get(node.tag, "tagged value")
    ctx.problem_at((1, 1), "", f"a catalog file is a mapping with `tools:`, not a {kind}{link_note(ctx.path)}")
    return False


def not_a_catalog(ctx: LoadContext, root: yaml.MappingNode) -> None:
    """A mapping with neither `tools:` nor only catalog fields: some other file (a password file, a
    config) was named as a catalog. One error naming the file; none of its content is quoted."""
    for key, _ in root.value:
        if isinstance(key.value, str) and difflib.get_close_matches(key.value, ["tools"], n=1, cutoff=0.75):
            where = (key.start_mark.line + 1, key.start_mark.column + 1)
            ctx.problem_at(where, "", "no `tools:` list; this top-level field is not one: is `tools:` misspelled?")
            return
    ctx.problem_at(
        (1, 1),
        "",
        f"not a catalog file{link_note(ctx.path)}: a catalog is a mapping with `tools:`, and this one has "
        "other top-level fields (its content is not shown)",
    )


def report_duplicates(ctx: LoadContext, data: Any) -> None:
    for line, col, name, path in ctx.locate.duplicate_keys():
        key = ""
        if len(path) >= 2 and path[0] == "tools" and isinstance(data, dict):
            tools = data.get("tools")
            if isinstance(tools, list) and isinstance(path[1], int) and path[1] < len(tools):
                key = key_of(tools[path[1]], path[1], data.get("group"))
        where = ".".join(str(p) for p in path[2:] if not isinstance(p, int)) if key else ""
        field_name = f"{where}.{name}" if where else name
        ctx.problem_at((line, col), key, f"duplicate field {field_name!r} (YAML would silently keep only the last)")


def key_of(item: Any, index: int, file_group: Any) -> str:
    """The key a tool's problems name: `group.name`, its name alone, or `tools[i]` when it has none."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return f"tools[{index}]"
    group = item.get("group") or file_group
    return f"{group}.{item['name']}" if isinstance(group, str) else str(item["name"])
