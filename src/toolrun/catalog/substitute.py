"""`${VAR}` and `${VAR:-default}` in catalog values (`$${VAR}` stays verbatim).

Each function takes the file's LoadContext: values come from `ctx.environ`; every variable read is
recorded in `ctx.used_env` (the cache keys on it), every substituted value's path in `ctx.substituted`.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .loadcontext import LoadContext

ENV_REF = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
TEMPLATE_FIELDS = ("exec", "curl")


def substitute(ctx: LoadContext, text: str, loc: tuple[Any, ...], key: str, template: bool) -> str:
    """`text` with its references replaced; an unset variable without a default is an error (and "")."""
    if "${" not in text:
        return text
    ctx.substituted.add(loc)

    reported: set[tuple[tuple[Any, ...], str]] = set()

    def repl(match: re.Match[str]) -> str:
        escaped, name, default = match.group(1), match.group(2), match.group(3)
        if escaped:
            return match.group(0)[1:]  # $${VAR} -> ${VAR}, verbatim
        value = ctx.environ.get(name)
        ctx.used_env[name] = value
        if value is None or (default is not None and value == ""):
            if default is None:
                if (loc, name) not in reported:
                    reported.add((loc, name))
                    _unset(ctx, match.group(0), name, loc, key)
                return ""
            value = default
        if template and any(c in value for c in "{}%#"):
            # Inserted as a Jinja string literal: the value is never read as template code.
            return "{{ " + json.dumps(value, ensure_ascii=False) + " }}"
        return value

    return ENV_REF.sub(repl, text)


def _unset(ctx: LoadContext, ref: str, name: str, loc: tuple[Any, ...], key: str) -> None:
    pos = ctx.locate.find(loc, lambda text: text.find(ref)) or ctx.locate.value(loc)
    ctx.problem_at(pos, key, f"environment variable {name!r} is not set (write ${{{name}:-default}} for a default)")


def substitute_tree(ctx: LoadContext, value: Any, loc: tuple[Any, ...], key: str) -> Any:
    """`value` with every string in it substituted (lists and mappings walked)."""
    if isinstance(value, str):
        return substitute(ctx, value, loc, key, False)
    if isinstance(value, list):
        return [substitute_tree(ctx, v, (*loc, i), key) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: substitute_tree(ctx, v, (*loc, k), key) for k, v in value.items()}
    return value


def substitute_tool(ctx: LoadContext, item: dict[str, Any], loc: tuple[Any, ...], key: str) -> dict[str, Any]:
    """A tool's fields substituted; a value in `exec:` or `curl:` is inserted so the template never runs it."""
    if not ctx.has_refs:
        return item
    out: dict[str, Any] = {}
    for k, v in item.items():
        if isinstance(v, str):
            out[k] = substitute(ctx, v, (*loc, k), key, k in TEMPLATE_FIELDS) if "${" in v else v
        else:
            out[k] = substitute_tree(ctx, v, (*loc, k), key)
    return out
