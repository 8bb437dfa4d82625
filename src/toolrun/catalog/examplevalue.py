"""An example value for a param that declares none, for the tool's example call.

The value obeys the param's own rules (enum, bounds, pattern), checked the way a call checks it; when
no such value can be made (a pattern too intricate to write a match for), there is none (`None`):
the example call leaves the param out, and the catalog warns (`example-left-out`).

A string for a pattern is made from the pattern's parse tree (Python's `re` parser, which reads the
RE2 syntax toolrun's patterns use for all simple patterns): the first alternative of each choice,
the least repetition of each part (one for `*`), and for a character class the first of
`a`..`z`, `0`..`9`, `A`..`Z` and some punctuation that it accepts.
"""

from __future__ import annotations

import string
from typing import Any

from ..errors import ParamError
from ..models import Param
from ..paramtypes import TYPES

_CANDIDATES = string.ascii_lowercase + string.digits + string.ascii_uppercase + "_-./~:@+= "
_MISSING = object()


def example_value(param: Param) -> Any:
    """The declared example or default, else a value made to obey the param's rules; None when none can be made."""
    for value in (param.example, param.default):
        if value is not None:
            return value
    for candidate in _candidates(param):
        if candidate is not _MISSING and _accepted(param, candidate):
            return candidate
    return None


def _candidates(param: Param) -> list[Any]:
    if param.enum:
        return [param.enum[0]]
    kind = param.type
    if kind in ("int", "float"):
        number = _number_within(param)
        return [int(number) if kind == "int" else float(number)]
    if kind == "str":
        return [_text(param, "text"), _text(param, _match(param.pattern) if param.pattern else "text")]
    if kind == "list":
        item = _match(param.pattern) if param.pattern else "text"
        count = max(0, int(param.min or 0))
        return [[item] * count if item is not _MISSING else _MISSING]
    if kind == "dict" and (param.min or 0) > 0:
        return [{f"key{i}": "value" for i in range(int(param.min or 0))}]
    return [TYPES[kind].placeholder if kind in TYPES else "text"]


def _number_within(param: Param) -> float:
    low, high = param.min, param.max
    if low is not None:
        return float(-(-low // 1)) if param.type == "int" else float(low)  # for an int: the least int >= min
    if high is not None and high < 1:
        return float(high // 1) if param.type == "int" else float(high)
    return 1.0


def _text(param: Param, text: Any) -> Any:
    """`text` stretched or cut to the param's length bounds (only when there is no pattern to keep)."""
    if text is _MISSING or param.pattern:
        return text
    if param.min is not None and len(text) < param.min:
        text = (text * int(param.min))[: int(-(-param.min // 1))]
    if param.max is not None and len(text) > param.max:
        text = text[: int(param.max)]
    return text


def _accepted(param: Param, value: Any) -> bool:
    from ..params import coerce

    try:
        coerce(param, value)
    except (ParamError, ValueError):
        return False
    return True


def _match(pattern: str | None) -> Any:
    """A string that `pattern` matches in full, or _MISSING."""
    if pattern is None:
        return _MISSING
    try:
        from re import _constants, _parser  # type: ignore[attr-defined]  # the stdlib's own regex parser

        return _generate(_parser.parse(pattern), _constants)
    except Exception:  # a pattern Python's parser does not read, or a construct not handled here
        return _MISSING


def _generate(items: Any, c: Any) -> str:
    return "".join(_one(op, arg, c) for op, arg in items)


def _one(op: Any, arg: Any, c: Any) -> str:
    if op is c.LITERAL:
        return chr(arg)
    if op is c.NOT_LITERAL:
        return "a" if chr(arg) != "a" else "b"
    if op is c.ANY:
        return "a"
    if op is c.IN:
        for char in _CANDIDATES:
            if _in_class(char, arg, c):
                return char
        raise ValueError("no simple character in the class")
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
        low, high, sub = arg
        count = low if low > 0 else (1 if high == c.MAXREPEAT else 0)
        return _generate(sub, c) * count
    if op is c.SUBPATTERN:
        return _generate(arg[-1], c)
    if op is c.BRANCH:
        return _generate(arg[1][0], c)
    if op is c.AT:
        return ""
    raise ValueError(f"not a simple pattern ({op})")


def _in_class(char: str, items: Any, c: Any) -> bool:
    negate = False
    found = False
    for op, arg in items:
        if op is c.NEGATE:
            negate = True
        elif op is c.LITERAL:
            found = found or char == chr(arg)
        elif op is c.RANGE:
            found = found or arg[0] <= ord(char) <= arg[1]
        elif op is c.CATEGORY:
            found = found or _in_category(char, arg, c)
        else:
            raise ValueError(f"not a simple class ({op})")
    return found != negate


def _in_category(char: str, category: Any, c: Any) -> bool:
    tests = {
        c.CATEGORY_DIGIT: char.isdigit(),
        c.CATEGORY_NOT_DIGIT: not char.isdigit(),
        c.CATEGORY_WORD: char.isalnum() or char == "_",
        c.CATEGORY_NOT_WORD: not (char.isalnum() or char == "_"),
        c.CATEGORY_SPACE: char.isspace(),
        c.CATEGORY_NOT_SPACE: not char.isspace(),
    }
    if category not in tests:
        raise ValueError(f"not a simple category ({category})")
    return tests[category]
