"""Validate and coerce call arguments against a tool's declared params.

Two entry points: `validate` for JSON values (HTTP, MCP, `k:=json` on the CLI) and
`parse_cli_args` for `name=value` words typed at a terminal. Every error names the
parameter and the expected form, and every bad input raises ParamError (never another
exception: huge numbers, deep nesting and undecodable text included).

Each value is coerced by its type's row of the `paramtypes` table (the coercions are listed
there), then checked against the param's declared constraints: `enum`, `min`/`max` (a value
or a length, as the type's row says), `pattern` (last, and with RE2). On the CLI, `name=v`
appends one str item per word to a list, and `name={"k": "v"}` is read as JSON for a dict.

Absent optional params are bound to their default (a fresh copy for lists and dicts). One without a
default is *not provided*: left out of the values of an exec or curl tool (undefined in its
template, absent from its stdin JSON), and None for an fn tool (a Python function needs an
argument for each parameter it declares).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .errors import ParamError
from .models import Param, ToolSpec
from .paramtypes import TYPES, short_repr, signature


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Any:
    """A param's `pattern`, compiled by RE2: matching takes time linear in the value, whatever the
    pattern (Python's `re` backtracks: `(a+)+b` against 28 characters took seconds on the event loop).

    Raises ValueError with RE2's reason for what it does not support (backreferences, lookaround)
    or what is not a regular expression. RE2 is imported on first use: most calls never need it.
    """
    import re2  # google-re2

    options = re2.Options()
    options.log_errors = False  # RE2 would also print every refused pattern to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(f"{reason} (RE2 syntax: no backreferences, no lookaround)") from None


def coerce(param: Param, value: Any) -> Any:
    """Coerce one JSON value to the declared type, or raise ParamError naming the param."""
    result = TYPES[param.type].coerce(param.name, value)
    _constrain(param, result)
    return result


def _constrain(param: Param, value: Any) -> None:
    """The declared constraints, as the type's row applies them: enum, then min/max, then the pattern."""
    name = param.name
    kind = TYPES[param.type]
    if param.enum is not None and value not in param.enum:
        choices = ", ".join(short_repr(c) for c in param.enum)
        raise ParamError(f"parameter {name!r} must be one of {choices}; got {short_repr(value)}")
    if param.min is not None or param.max is not None:
        size = len(value) if kind.bounds_length and isinstance(value, (str, list, dict)) else value
        if isinstance(size, bool) or not isinstance(size, (int, float)):
            size = None
        if size is not None and param.min is not None and size < param.min:
            raise ParamError(f"parameter {name!r}: {kind.noun} {short_repr(size)} is below the minimum {param.min:g}")
        if size is not None and param.max is not None and size > param.max:
            raise ParamError(f"parameter {name!r}: {kind.noun} {short_repr(size)} is above the maximum {param.max:g}")
    # The pattern last, once the bounds hold: never run it against a value already refused.
    if param.pattern is not None and kind.pattern_on:
        for item in value if kind.pattern_on == "items" else [value]:
            if isinstance(item, str) and not compile_pattern(param.pattern).fullmatch(item):
                raise ParamError(f"parameter {name!r}: {short_repr(item)} does not match {param.pattern!r}")


@dataclass(frozen=True, slots=True)
class Checks:
    """A tool's parameter checks, prepared once (per loaded catalog: service.CatalogState keeps them): the declared
    names, and for each param the one function its value goes through (its type's coercion alone when it declares
    no constraint, else `coerce`, or the secret's `_coerce_secret`). The same checks, in the same order, as
    preparing them at every call would run."""

    tool: ToolSpec
    declared: dict[str, Param]
    steps: tuple[tuple[Param, Callable[[Param, Any], Any]], ...]


def _type_only(kind_coerce: Callable[[str, Any], Any]) -> Callable[[Param, Any], Any]:
    """`coerce` for a param without enum, bounds or (a type's applicable) pattern: its type's coercion alone."""
    return lambda param, value: kind_coerce(param.name, value)


def prepare(tool: ToolSpec) -> Checks:
    """The checks of `tool`'s params, for `validate` (see Checks)."""
    steps: list[tuple[Param, Callable[[Param, Any], Any]]] = []
    for param in tool.params:
        kind = TYPES[param.type]
        if param.secret:
            steps.append((param, _coerce_secret))
        elif (
            param.enum is None
            and param.min is None
            and param.max is None
            and (param.pattern is None or not kind.pattern_on)
        ):
            steps.append((param, _type_only(kind.coerce)))  # `_constrain` would check nothing
        else:
            steps.append((param, coerce))
    return Checks(tool, {p.name: p for p in tool.params}, tuple(steps))


def validate(tool: ToolSpec, args: Mapping[str, Any], checks: Checks | None = None) -> dict[str, Any]:
    """Supplied values coerced and defaults filled; an absent optional param without a default is
    left out (None for an fn tool). `checks`: the tool's, prepared once (`prepare`), else prepared now.

    A ParamError carries the tool's signature (`exc.signature`), so a door can show how to call it."""
    try:
        return _validate(tool, args, checks if checks is not None and checks.tool is tool else prepare(tool))
    except ParamError as exc:
        exc.signature = signature(tool)
        raise


def _validate(tool: ToolSpec, args: Mapping[str, Any], checks: Checks) -> dict[str, Any]:
    declared = checks.declared
    unknown = [k for k in args if k not in declared]
    if unknown:
        allowed = ", ".join(declared) or "none"
        raise ParamError(f"unknown parameter {unknown[0]!r} for {tool.key} (accepted: {allowed})")
    values: dict[str, Any] = {}
    fn = tool.kind == "fn"
    for param, check in checks.steps:
        name = param.name
        if name in args and args[name] is not None:
            values[name] = check(param, args[name])
        elif param.required:
            raise ParamError(f"missing required parameter {name!r} ({param.type}) for {tool.key}")
        elif isinstance(param.default, (list, dict)):
            values[name] = copy.deepcopy(param.default)  # a call must not change the default
        elif param.default is not None or fn:
            values[name] = param.default
    for name, quoted in tool.option_params:
        if name in values:
            _refuse_options(name, values[name], quoted, declared[name].secret)
    return values


_OPTION_WORD = re.compile(r"(?:^|\s)-")


def _refuse_options(name: str, value: Any, quoted: bool, secret: bool = False) -> None:
    """A curl tool's value that reaches curl's option position must not start an option.

    Quoted, a value (each item of a list) is one word: it must not begin with `-`. Unquoted, the
    shell splits it: no word of it may begin with `-`."""
    items = value if quoted and isinstance(value, list) else [value]
    for item in items:
        text = item if isinstance(item, str) else json.dumps(item, separators=(",", ":"), ensure_ascii=False)
        if text.startswith("-") if quoted else _OPTION_WORD.search(text):
            shown = "the value (secret, not shown)" if secret else short_repr(item)
            raise ParamError(
                f"parameter {name!r}: {shown} would be read by curl as an option (a word starting with '-')"
            )


def _coerce_secret(param: Param, value: Any) -> Any:
    """`coerce` for a secret param: the error names the param and the rule, never the value."""
    try:
        return coerce(param, value)
    except ParamError:
        rules = [f"expects {param.type}"]
        if param.enum is not None:
            rules.append("one of its declared values")
        if param.pattern is not None:
            rules.append(f"matching {param.pattern!r}")
        if param.min is not None or param.max is not None:
            rules.append("within its length bounds")
        raise ParamError(f"parameter {param.name!r} (secret, value not shown) {', '.join(rules)}") from None


def parse_cli_args(tool: ToolSpec, words: Iterable[str]) -> dict[str, Any]:
    """`name=text` (coerced per declared type) and `name:=json` words; repeated list names append."""
    declared = {p.name: p for p in tool.params}
    args: dict[str, Any] = {}
    for word in words:
        eq = word.find("=")
        if eq <= 0 or (eq == 1 and word[0] == ":"):
            raise ParamError(f"argument {word!r} is not of the form name=value or name:=json")
        raw_json = word[eq - 1] == ":"
        name, text = (word[: eq - 1], word[eq + 1 :]) if raw_json else (word[:eq], word[eq + 1 :])
        name = name.strip()
        param = declared.get(name)
        if param is None:
            allowed = ", ".join(declared) or "none"
            raise ParamError(f"unknown parameter {name!r} for {tool.key} (accepted: {allowed})")
        if raw_json:
            try:
                value: Any = json.loads(text)
            except (ValueError, RecursionError) as exc:
                shown = "the value" if param.secret else short_repr(text)
                raise ParamError(f"parameter {name!r}: {shown} is not valid JSON ({exc})") from None
        elif param.type == "list":
            existing = args.get(name)
            value = [*existing, text] if isinstance(existing, list) else [text]
        elif param.type == "dict":
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                raise ParamError(
                    f'parameter {name!r} expects dict: write {name}:=\'{{"k": "v"}}\' (JSON object)'
                ) from None
        else:
            value = text
        args[name] = value
    return args
