"""The state one file's load shares, and its problems: positioned findings, pydantic errors in words."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import WARNING_CODES, Problem
from ..models import PARAM_TYPES
from .options import LoadOptions
from .positions import _Locator

if TYPE_CHECKING:
    from pydantic import ValidationError


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


class _LoaderBase:
    """One catalog file's load: its inputs, what it found, and what the cache must check."""

    def __init__(self, path: Path, environ: Mapping[str, str], options: LoadOptions) -> None:
        self.path = path
        self.name = str(path)
        self.environ = environ
        self.options = options
        self.problems: list[Problem] = []
        self.used_env: dict[str, str | None] = {}
        self.extra_files: dict[str, str] = {}
        self.substituted: set[tuple[Any, ...]] = set()
        self.has_refs = True
        self.cacheable = True  # False once a result depends on something the cache cannot check
        self.shared: dict[tuple[type, Any], Any] = {}  # equal values of this file's tools, one object each
        self.locate = _Locator("")
        self.declared: list[Any] = []  # this file's named sandbox profiles (sandboxes.Declared)

    def problem(self, loc: Sequence[Any], key: str, message: str, severity: str = "error", code: str = "") -> None:
        """A problem with the field at `loc` (positioned at its key); `code`: a warning's WARNING_CODES name."""
        line, col = self.locate.key(loc)
        self.problems.append(Problem(self.name, line, col, key, message, severity, code))

    def problem_at(self, pos: tuple[int, int], key: str, message: str, severity: str = "error", code: str = "") -> None:
        self.problems.append(Problem(self.name, pos[0], pos[1], key, message, severity, code))

    def acknowledge(self, allowed: Sequence[str] | None, since: int, loc: tuple[Any, ...], key: str) -> None:
        """Drop the warnings (found since problem number `since`) that the tool's `allow_warnings:` names;
        an entry that names none of its warnings is a warning itself (it would hide a future one)."""
        if not allowed:
            return
        used: set[str] = set()
        kept = []
        for problem in self.problems[since:]:
            if problem.severity == "warning" and problem.code in allowed:
                used.add(problem.code)
            else:
                kept.append(problem)
        self.problems[since:] = kept
        for i, code in enumerate(allowed):
            if code not in used:
                self.problem(
                    (*loc, "allow_warnings", i),
                    key,
                    f"allow_warnings: {code!r} acknowledges no warning of this tool; remove it",
                    "warning",
                )

    def errors(self) -> int:
        return sum(1 for p in self.problems if p.severity == "error")

    def report(self, exc: ValidationError, base: tuple[Any, ...], key: str, model: type[Any], data: Any) -> None:
        seen: set[tuple[Any, ...]] = set()
        for err in exc.errors():
            eloc = _data_loc(err["loc"], data)
            if eloc in seen:
                continue  # a value no member of a union accepts: report it once
            seen.add(eloc)
            loc = (*base, *eloc)
            kind = err["type"]
            field_name = eloc[-1] if eloc else ""
            where = ".".join(str(p) for p in eloc if not isinstance(p, int)) or "value"
            pos = self.locate.value(loc)
            if kind == "extra_forbidden":
                known = _fields_at(model, eloc[:-1])
                close = difflib.get_close_matches(str(field_name), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                message = f"unknown field {field_name!r}{hint}"
                pos = self.locate.key(loc)
            elif kind == "missing":
                message = f"missing required field {field_name!r}"
                pos = self.locate.value(loc[:-1])
            elif kind == "literal_error" and field_name == "type":
                message = unknown_type_message(err["input"])
            elif kind == "literal_error" and where == "allow_warnings":
                close = difflib.get_close_matches(str(err["input"]), list(WARNING_CODES), n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"one of {', '.join(WARNING_CODES)}"
                message = f"allow_warnings: {err['input']!r} is not the name of a warning ({hint})"
            elif kind == "string_pattern_mismatch" and (field_name in ("name", "group") or where == "groups"):
                message = f"{where}: {err['input']!r} is not a valid name (letters, digits, _ and -)"
            elif kind == "string_pattern_mismatch" and err["loc"][-1] == "[key]":
                message = f"{where.rsplit('.', 1)[0]}: {err['input']!r} is not a variable name"
                pos = self.locate.key(loc)
            elif kind == "string_pattern_mismatch" and where == "env_passthrough":
                message = f"env_passthrough: {err['input']!r} is not a variable name (or a PREFIX_* pattern)"
            else:
                message = f"{where}: {err['msg']}"
                if kind not in ("size", "model_type", "dict_type", "list_type") and _is_scalar(err.get("input")):
                    message += f" (got {err['input']!r})"
            self.problem_at(pos, key, message)
