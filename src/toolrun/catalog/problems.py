"""A file's problems: pydantic errors in words, unknown types named, warnings a tool acknowledges, and a
catalog's warnings as the lines a door prints."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import WARNING_CODES, Problem
from ..paramtypes import PARAM_TYPES
from ..words import plural

if TYPE_CHECKING:
    from pydantic import ValidationError

    from .loadcontext import LoadContext


_UNION_MEMBERS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})


def _data_loc(loc: Sequence[Any], data: Any) -> tuple[Any, ...]:
    """The part of a pydantic error location that addresses the data (not union member names)."""
    out: list[Any] = []
    node = data
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        if in_dict or (isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)):
            node = node[part]
        else:
            if isinstance(node, dict) and isinstance(part, str) and part not in _UNION_MEMBERS and "[" not in part:
                out.append(part)  # a missing field
            break
        out.append(part)
    return tuple(out)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


# What people coming from JSON Schema, TypeScript or Python's typing write for toolrun's types.
TYPE_ALIASES = {
    "integer": "int",
    "number": "float",
    "string": "str",
    "text": "str",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "double": "float",
    "long": "int",
    "map": "dict",
}


def unknown_type_message(given: Any) -> str:
    """The error for a param type toolrun does not know, suggesting the one meant."""
    meant = TYPE_ALIASES.get(str(given).strip().lower())
    if meant is None:
        close = difflib.get_close_matches(str(given), PARAM_TYPES, n=1)
        meant = close[0] if close else None
    hint = f"; did you mean {meant!r}?" if meant else ""
    return f"unknown param type {given!r} (expected one of {', '.join(PARAM_TYPES)}{hint})"


def _fields_at(model: type[Any], loc: Sequence[Any]) -> list[str]:
    """Field names (and aliases) of the model found by following `loc` through nested models."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        info = getattr(current, "model_fields", {}).get(part)
        if info is None:
            break
        annotation = info.annotation
        for candidate in (annotation, *getattr(annotation, "__args__", ())):
            inner = getattr(candidate, "__args__", (candidate,))
            for t in (candidate, *inner):
                if isinstance(t, type) and hasattr(t, "model_fields"):
                    current = t
                    break
    fields = getattr(current, "model_fields", {})
    return [info.alias or name for name, info in fields.items()]


def acknowledge(ctx: LoadContext, allowed: Sequence[str] | None, since: int, loc: tuple[Any, ...], key: str) -> None:
    """Drop the warnings (found since problem number `since`) that the tool's `allow_warnings:` names;
    an entry that names none of its warnings is a warning itself (it would hide a future one)."""
    if not allowed:
        return
    used: set[str] = set()
    kept = []
    for problem in ctx.problems[since:]:
        if problem.severity == "warning" and problem.code in allowed:
            used.add(problem.code)
        else:
            kept.append(problem)
    ctx.problems[since:] = kept
    for i, code in enumerate(allowed):
        if code not in used:
            ctx.problem(
                (*loc, "allow_warnings", i),
                key,
                f"allow_warnings: {code!r} acknowledges no warning of this tool; remove it",
                "warning",
            )


def report(
    ctx: LoadContext, exc: ValidationError, base: tuple[Any, ...], key: str, model: type[Any], data: Any
) -> None:
    """One error per field pydantic refused (a value no member of a union accepts: once), in words."""
    seen: set[tuple[Any, ...]] = set()
    for err in exc.errors():
        eloc = _data_loc(err["loc"], data)
        if eloc in seen:
            continue
        seen.add(eloc)
        loc = (*base, *eloc)
        message, at = _message(err, eloc, model)
        if at == "parent":
            loc = loc[:-1]
        ctx.problem_at(ctx.locate.key(loc) if at == "key" else ctx.locate.value(loc), key, message)


def _message(err: Any, eloc: tuple[Any, ...], model: type[Any]) -> tuple[str, str]:
    """A pydantic error in words, and where it is positioned: at the field's "key", its "value", or
    (a missing field) the value of its "parent", the mapping that lacks it."""
    kind = err["type"]
    field_name = eloc[-1] if eloc else ""
    where = ".".join(str(p) for p in eloc if not isinstance(p, int)) or "value"
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(str(field_name), _fields_at(model, eloc[:-1]), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown field {field_name!r}{hint}", "key"
    if kind == "missing":
        return f"missing required field {field_name!r}", "parent"
    if kind == "literal_error" and field_name == "type":
        return unknown_type_message(err["input"]), "value"
    if kind == "literal_error" and where == "allow_warnings":
        close = difflib.get_close_matches(str(err["input"]), list(WARNING_CODES), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"one of {', '.join(WARNING_CODES)}"
        return f"allow_warnings: {err['input']!r} is not the name of a warning ({hint})", "value"
    if kind == "string_pattern_mismatch":
        return _pattern_message(err, field_name, where)
    message = f"{where}: {err['msg']}"
    if kind not in ("size", "model_type", "dict_type", "list_type") and _is_scalar(err.get("input")):
        message += f" (got {err['input']!r})"
    return message, "value"


def _pattern_message(err: Any, field_name: Any, where: str) -> tuple[str, str]:
    if field_name in ("name", "group") or where == "groups":
        return f"{where}: {err['input']!r} is not a valid name (letters, digits, _ and -)", "value"
    if err["loc"][-1] == "[key]":
        return f"{where.rsplit('.', 1)[0]}: {err['input']!r} is not a variable name", "key"
    if where == "env_passthrough":
        return f"env_passthrough: {err['input']!r} is not a variable name (or a PREFIX_* pattern)", "value"
    got = f" (got {err['input']!r})" if _is_scalar(err.get("input")) else ""
    return f"{where}: {err['msg']}{got}", "value"


def warning_lines(warnings: Sequence[Problem], shown: int = 20) -> list[str]:
    """The catalog's warnings, one line each (at most `shown`, then how many more and where to see them)."""
    lines = [f"catalog {p}" for p in warnings[:shown]]
    if len(warnings) > shown:
        more = len(warnings) - shown
        lines.append(f"... and {plural(more, 'more warning')} (toolrun validate-catalog lists them all)")
    if warnings:
        lines.append(
            "acknowledge a deliberate one with `allow_warnings: [<name>]` on its tool; "
            "`toolrun validate-catalog --strict` fails on any"
        )
    return lines
