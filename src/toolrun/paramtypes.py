"""The six param types, in one table: JSON Schema, the words that read as true or false, how
`min`/`max` apply, and how each type and its constraints are written for people and for schemas.

Every door reads its type facts from here: params.py (coercion and validation), the tool entry,
`describe_tools`, the MCP input schemas, the per-tool request schemas of `/openapi.json`, the
signature lines of `search` and the CLI. The catalog loader checks declared types against it.

=====  ===========  ==========================  ============================================
type   JSON Schema  `min` / `max` bound         accepted (coercion, see params.py)
=====  ===========  ==========================  ============================================
str    string       length (minLength/maxLength) text; an int or finite float as its text
int    integer      value (minimum/maximum)      an int, a float with no fraction, digit text
float  number       value (minimum/maximum)      a number or numeric text, finite
bool   boolean      -                            true/false, 0/1, TRUE_WORDS / FALSE_WORDS text
list   array        item count (minItems/...)    a JSON array
dict   object       key count (minProperties/..) a JSON object with str keys
=====  ===========  ==========================  ============================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # models imports this module
    from .models import Param, ToolSpec

# Text read as a bool: by tool params, by settings (environment variables, config) and by the CLI.
TRUE_WORDS = frozenset({"true", "1", "yes", "on", "y", "t"})
FALSE_WORDS = frozenset({"false", "0", "no", "off", "n", "f"})


def parse_bool(text: str) -> bool | None:
    """True or False for one of the words (any case, spaces trimmed), else None."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


@dataclass(frozen=True, slots=True)
class ParamType:
    name: str
    json: str  # JSON Schema type
    bounds: tuple[str, str] | None  # JSON Schema keywords that `min` and `max` become
    bounds_length: bool  # whether min/max bound a length (or count) rather than the value
    noun: str  # what min/max measure, in messages


TYPES: dict[str, ParamType] = {
    t.name: t
    for t in (
        ParamType("str", "string", ("minLength", "maxLength"), True, "length"),
        ParamType("int", "integer", ("minimum", "maximum"), False, "value"),
        ParamType("float", "number", ("minimum", "maximum"), False, "value"),
        ParamType("bool", "boolean", None, False, "value"),
        ParamType("list", "array", ("minItems", "maxItems"), True, "length"),
        ParamType("dict", "object", ("minProperties", "maxProperties"), True, "length"),
    )
}


def type_of(value: Any) -> str:
    """The param type name of a JSON value (`null` for None, the Python name for anything else)."""
    if value is None:
        return "null"
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"), (dict, "dict")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _num(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def constraints(param: Param) -> dict[str, Any]:
    """The declared constraints, as the tool entry and `describe_tools` show them (only those set)."""
    out: dict[str, Any] = {}
    if param.enum is not None:
        out["enum"] = list(param.enum)
    if param.pattern is not None:
        out["pattern"] = param.pattern
    if param.min is not None:
        out["min"] = _num(param.min)
    if param.max is not None:
        out["max"] = _num(param.max)
    return out


def json_schema(param: Param) -> dict[str, Any]:
    """A JSON Schema accepting the values the param accepts in their own type (coercible text aside)."""
    kind = TYPES[param.type]
    prop: dict[str, Any] = {"type": kind.json}
    if param.description:
        prop["description"] = param.description
    secret = bool(getattr(param, "secret", False))  # a secret's default is never shown
    if param.default is not None and not secret:
        prop["default"] = param.default
    if param.enum is not None:
        prop["enum"] = list(param.enum)
    if param.pattern is not None:
        # JSON Schema patterns search; toolrun matches the whole value: anchor it.
        anchored = f"^(?:{param.pattern})$"
        if param.type == "str":
            prop["pattern"] = anchored
        elif param.type == "list":
            prop["items"] = {"pattern": anchored}
    if kind.bounds is not None:
        low, high = kind.bounds
        if param.min is not None:
            prop[low] = max(0, math.ceil(param.min)) if kind.bounds_length else _num(param.min)
        if param.max is not None:
            prop[high] = max(0, math.floor(param.max)) if kind.bounds_length else _num(param.max)
    if param.example is not None and not secret:
        prop["examples"] = [param.example]
    return prop


def request_schema(tool: ToolSpec) -> dict[str, Any]:
    """The JSON Schema of a call's arguments object (MCP input schema, OpenAPI request body)."""
    return {
        "type": "object",
        "properties": {p.name: json_schema(p) for p in tool.params},
        "required": [p.name for p in tool.params if p.required],
        "additionalProperties": False,
    }


def _short(value: Any) -> str:
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # not JSON, an int too long to print, absurd nesting
        return f"<{type_of(value)}>"
    return text if len(text) <= 30 else text[:27] + "..."


def describe(param: Param) -> str:
    """One param for a signature line: `name: type = default`, with its constraints in brackets.

    `path: str`, `n: int = 5 [1..100]`, `level: str [debug|info]`, `tag?: str [~^v\\d+$]`."""
    text = f"{param.name}{'' if param.required or param.default is not None else '?'}: {param.type}"
    if param.default is not None:
        text += " = ***" if getattr(param, "secret", False) else f" = {_short(param.default)}"
    notes = []
    if param.enum is not None:
        notes.append("|".join(str(c) if isinstance(c, str) else _short(c) for c in param.enum))
    if param.min is not None or param.max is not None:
        low = "" if param.min is None else f"{_num(param.min)}"
        high = "" if param.max is None else f"{_num(param.max)}"
        notes.append(f"{'len ' if TYPES[param.type].bounds_length else ''}{low}..{high}")
    if param.pattern is not None:
        notes.append(f"~{param.pattern}")
    if notes:
        text += f" [{'; '.join(notes)}]"
    return text


_UNITS = {"str": ("character", "characters"), "list": ("item", "items"), "dict": ("entry", "entries")}


def _bounds_words(param: Param) -> str:
    """`between 1 and 100`, `at least 3 characters`, `1 to 5 items`; '' when no bound is declared."""
    low = None if param.min is None else _num(param.min)
    high = None if param.max is None else _num(param.max)
    one, many = _UNITS.get(param.type, ("", "")) if TYPES[param.type].bounds_length else ("", "")

    def counted(n: float | int) -> str:
        return f"{n} {one if n == 1 else many}" if one else str(n)

    if low is not None and high is not None:
        return f"{low} to {counted(high)}" if one else f"between {low} and {high}"
    if low is not None:
        return f"at least {counted(low)}"
    if high is not None:
        return f"at most {counted(high)}"
    return ""


def rules(param: Param) -> list[str]:
    """The declared constraints in words, as the UI words them under a field: `one of: a, b`,
    `between 1 and 100`, `at most 5 items`, `must match: [a-z]+` (the whole value)."""
    out = []
    if param.enum is not None:
        out.append("one of: " + ", ".join(c if isinstance(c, str) else _short(c) for c in param.enum))
    bounds = _bounds_words(param)
    if bounds:
        out.append(bounds)
    if param.pattern is not None:
        out.append(f"must match: {param.pattern}")
    return out


def signature(tool: ToolSpec) -> str:
    """`key(param: type = default, ...)`: how to call the tool, in one line."""
    return f"{tool.key}({', '.join(describe(p) for p in tool.params)})"
