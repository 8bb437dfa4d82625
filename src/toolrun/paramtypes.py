"""The six param types, in one table: for each, how a call's value is coerced to it, what the
catalog may write for it, its JSON Schema, how `min`/`max` apply, and how it is written for people.

Every door reads its type facts from here: params.py (validation: `coerce` runs the row's coercion,
then the declared constraints), the tool entry, `describe_tools`, the MCP input schemas, the per-tool
request schemas of `/openapi.json`, the signature lines of `search` and the CLI, the catalog loader
(which types a `default`, `example` or `enum` entry may have, whether a param may be secret, the
type of an fn parameter's annotation) and the example values it makes. Adding a type is adding a row.

=====  ===========  ==========================  ============================================
type   JSON Schema  `min` / `max` bound         accepted (coercion)
=====  ===========  ==========================  ============================================
str    string       length (minLength/maxLength) text; an int or finite float as its text
int    integer      value (minimum/maximum)      an int, a float with no fraction, digit text
float  number       value (minimum/maximum)      a number or numeric text, finite
bool   boolean      -                            true/false, 0/1, TRUE_WORDS / FALSE_WORDS text
list   array        item count (minItems/...)    a JSON array
dict   object       key count (minProperties/..) a JSON object with str keys
=====  ===========  ==========================  ============================================

Coercion (a JSON value -> the declared type), exactly:

=====  =====================================================================================
str    str as is; int and finite float as their text; bool, null, list, dict rejected
int    int; a float with no fraction; text of decimal digits (sign and spaces allowed);
       bool rejected
float  int or float; numeric text; NaN and infinities rejected (also inside lists and dicts)
bool   true/false; 0/1; text true/false, yes/no, on/off, y/n, t/f, 1/0 (any case)
list   a JSON array (items untouched)
dict   a JSON object with str keys
=====  =====================================================================================

Text anywhere in a value (list items and dict keys included) must not contain NUL bytes or lone
surrogates: a command cannot carry NUL, and a surrogate cannot be encoded. Every bad value raises
ParamError naming the param (never another exception: huge numbers and deep nesting included).
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ParamError
from .models import compact_number

if TYPE_CHECKING:
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


def type_of(value: Any) -> str:
    """The param type name of a JSON value (`null` for None, the Python name for anything else)."""
    if value is None:
        return "null"
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"), (dict, "dict")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


# -- coercion: a call's JSON value -> the declared type ------------------------------------------

_INT = re.compile(r"^[+-]?[0-9]+$")
# Python refuses to print ints of more than 4300 digits (and JSON cannot carry them): an int is
# capped well below that, so every validated value renders and serialises.
_MAX_INT_BITS = 14_000
_REPR = reprlib.Repr()
_REPR.maxstring = 40
_REPR.maxother = 40
_REPR.maxlevel = 2


def short_repr(value: Any) -> str:
    """A short repr for messages: bounded in length and depth, safe for any value."""
    try:
        text = _REPR.repr(value)
    except (ValueError, RecursionError):  # an int too long to print, absurd nesting
        return f"<{type_of(value)}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _check_text(name: str, text: str) -> None:
    if "\x00" in text:
        raise ParamError(f"parameter {name!r}: NUL bytes are not allowed")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ParamError(f"parameter {name!r}: not valid UTF-8 text (lone surrogate)") from None


def _check_int(name: str, value: int) -> None:
    if value.bit_length() > _MAX_INT_BITS:
        raise ParamError(f"parameter {name!r}: an int of more than 4000 digits is not accepted")


def _check_nested(name: str, value: Any, depth: int = 0) -> None:
    if depth > 64:
        raise ParamError(f"parameter {name!r}: nested more than 64 levels deep")
    if isinstance(value, str):
        _check_text(name, value)
    elif isinstance(value, int):
        _check_int(name, value)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ParamError(f"parameter {name!r}: {value} is not a finite number")
    elif isinstance(value, list):
        for item in value:
            _check_nested(name, item, depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ParamError(f"parameter {name!r}: dict keys must be strings")
            _check_text(name, k)
            _check_nested(name, v, depth + 1)


def _expected(name: str, kind: str) -> str:
    return f"parameter {name!r} expects {kind}"


def _to_str(name: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ParamError(f"{_expected(name, 'str')}, got {type_of(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ParamError(f"{_expected(name, 'str')}, got {value}")
    if isinstance(value, int):
        _check_int(name, value)
    result = value if isinstance(value, str) else str(value)
    _check_text(name, result)
    return result


def _to_int(name: str, value: Any) -> int:
    expected = _expected(name, "int")
    if isinstance(value, bool):
        raise ParamError(f"{expected}, got bool")
    if isinstance(value, int):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str) and _INT.match(value.strip()):
        try:
            result = int(value.strip())
        except ValueError:  # more than 4300 digits
            raise ParamError(f"{expected}, got a number of {len(value.strip())} characters") from None
    else:
        raise ParamError(f"{expected}, got {type_of(value)} {short_repr(value)}")
    _check_int(name, result)
    return result


def _to_float(name: str, value: Any) -> float:
    expected = _expected(name, "float")
    if isinstance(value, bool):
        raise ParamError(f"{expected}, got bool")
    if isinstance(value, (int, float)):
        try:
            result = float(value)
        except OverflowError:
            raise ParamError(f"{expected}, got an int too large for a float") from None
    elif isinstance(value, str):
        try:
            result = float(value.strip())
        except ValueError:
            raise ParamError(f"{expected}, got {short_repr(value)}") from None
    else:
        raise ParamError(f"{expected}, got {type_of(value)}")
    if not math.isfinite(result):
        raise ParamError(f"{expected}, got {short_repr(value)} (not a finite number)")
    return result


def _to_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and (word := parse_bool(value)) is not None:
        return word
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ParamError(f"{_expected(name, 'bool')} (true or false), got {type_of(value)} {short_repr(value)}")


def _to_list(name: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ParamError(f"{_expected(name, 'list')}, got {type_of(value)}")
    _check_nested(name, value)
    return value


def _to_dict(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ParamError(f"{_expected(name, 'dict')}, got {type_of(value)}")
    _check_nested(name, value)
    return value


# -- the table ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParamType:
    """One param type: every fact about it that a call, a door or the catalog needs."""

    name: str
    json: str  # JSON Schema type
    bounds: tuple[str, str] | None  # JSON Schema keywords that `min` and `max` become
    bounds_length: bool  # whether min/max bound a length (or count) rather than the value
    noun: str  # what min/max measure, in messages
    coerce: Callable[[str, Any], Any]  # (param name, a call's JSON value) -> the value; ParamError naming the param
    # The catalog: the JSON types (`type_of`) its `default`, `example` and `enum` entries may be written as.
    written_as: tuple[str, ...]
    secret: bool = False  # whether the catalog may declare a param of this type `secret: true`
    annotations: tuple[str, ...] = ()  # an fn parameter's annotation names (lower case) read as this type
    units: tuple[str, str] = ("", "")  # what a length bound counts (one, many), in words for people
    placeholder: Any = None  # the example value of a param with no enum, bounds or pattern to obey
    pattern_on: str = ""  # what a declared `pattern` must match: "value", "items" (each str item), "" (nothing)

    def holds(self, value: Any) -> bool:
        """Whether a catalog value (a `default`, an `example`, an `enum` entry) is of this type as written."""
        return type_of(value) in self.written_as


TYPES: dict[str, ParamType] = {
    t.name: t
    for t in (
        ParamType(
            name="str",
            json="string",
            bounds=("minLength", "maxLength"),
            bounds_length=True,
            noun="length",
            coerce=_to_str,
            written_as=("str",),
            secret=True,
            annotations=("str",),
            units=("character", "characters"),
            placeholder="text",
            pattern_on="value",
        ),
        ParamType(
            name="int",
            json="integer",
            bounds=("minimum", "maximum"),
            bounds_length=False,
            noun="value",
            coerce=_to_int,
            written_as=("int",),
            annotations=("int",),
            placeholder=1,
        ),
        ParamType(
            name="float",
            json="number",
            bounds=("minimum", "maximum"),
            bounds_length=False,
            noun="value",
            coerce=_to_float,
            written_as=("float", "int"),
            annotations=("float",),
            placeholder=1.0,
        ),
        ParamType(
            name="bool",
            json="boolean",
            bounds=None,
            bounds_length=False,
            noun="value",
            coerce=_to_bool,
            written_as=("bool",),
            annotations=("bool",),
            placeholder=True,
        ),
        ParamType(
            name="list",
            json="array",
            bounds=("minItems", "maxItems"),
            bounds_length=True,
            noun="length",
            coerce=_to_list,
            written_as=("list",),
            annotations=("list", "tuple", "set", "sequence"),
            units=("item", "items"),
            placeholder=[],
            pattern_on="items",
        ),
        ParamType(
            name="dict",
            json="object",
            bounds=("minProperties", "maxProperties"),
            bounds_length=True,
            noun="length",
            coerce=_to_dict,
            written_as=("dict",),
            annotations=("dict", "mapping"),
            units=("entry", "entries"),
            placeholder={},
        ),
    )
}
PARAM_TYPES = tuple(TYPES)  # the type names, in the table's order (messages, the catalog's JSON Schema)
ANNOTATION_TYPES = {word: t.name for t in TYPES.values() for word in t.annotations}


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
    if param.pattern is not None and kind.pattern_on:
        # JSON Schema patterns search; toolrun matches the whole value: anchor it.
        anchored = f"^(?:{param.pattern})$"
        if kind.pattern_on == "value":
            prop["pattern"] = anchored
        else:
            prop["items"] = {"pattern": anchored}
    if kind.bounds is not None:
        low, high = kind.bounds
        if param.min is not None:
            prop[low] = max(0, math.ceil(param.min)) if kind.bounds_length else compact_number(param.min)
        if param.max is not None:
            prop[high] = max(0, math.floor(param.max)) if kind.bounds_length else compact_number(param.max)
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


def _short_json(value: Any) -> str:
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
        text += " = ***" if getattr(param, "secret", False) else f" = {_short_json(param.default)}"
    notes = []
    if param.enum is not None:
        notes.append("|".join(str(c) if isinstance(c, str) else _short_json(c) for c in param.enum))
    if param.min is not None or param.max is not None:
        low = "" if param.min is None else f"{compact_number(param.min)}"
        high = "" if param.max is None else f"{compact_number(param.max)}"
        notes.append(f"{'len ' if TYPES[param.type].bounds_length else ''}{low}..{high}")
    if param.pattern is not None:
        notes.append(f"~{param.pattern}")
    if notes:
        text += f" [{'; '.join(notes)}]"
    return text


def _bounds_words(param: Param) -> str:
    """`between 1 and 100`, `at least 3 characters`, `1 to 5 items`; '' when no bound is declared."""
    low = None if param.min is None else compact_number(param.min)
    high = None if param.max is None else compact_number(param.max)
    kind = TYPES[param.type]
    one, many = kind.units if kind.bounds_length else ("", "")

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
        out.append("one of: " + ", ".join(c if isinstance(c, str) else _short_json(c) for c in param.enum))
    bounds = _bounds_words(param)
    if bounds:
        out.append(bounds)
    if param.pattern is not None:
        out.append(f"must match: {param.pattern}")
    return out


def signature(tool: ToolSpec) -> str:
    """`key(param: type = default, ...)`: how to call the tool, in one line."""
    return f"{tool.key}({', '.join(describe(p) for p in tool.params)})"
