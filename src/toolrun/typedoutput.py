"""Typed outputs of exec and curl tools (`output:` in the catalog): parse, check, describe.

    text   the standard output as it is (the default)
    json   parsed as one JSON value; checked against the tool's JSON Schema (2020-12) when it declares one
    lines  a list of strings, one a line (the last line's newline does not make an empty one)

Only a command that exits with code 0 is parsed: a failed command still answers its (exit code, stdout,
stderr). Output that does not parse, or does not match, fails the call with `OutputInvalid`, naming the first
mismatch and keeping the raw text; it is never passed on as if it were fine.

jsonschema (a dependency of the mcp SDK) is imported only when a tool with a schema is loaded or called.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from .errors import OutputInvalid
from .models import EXEC_RETURN_TYPE, Output

FORMATS = ("text", "json", "lines")
LINES_SCHEMA: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
_SHOWN = 200  # characters of a bad value quoted in a message


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(output: Output, text: str, key: str, truncated: bool = False) -> Any:
    """The value `text` (a tool's standard output) stands for, or OutputInvalid naming what is wrong."""
    if output.format == "lines":
        return text.splitlines()
    cut = " (the output was cut at the tool's output limit)" if truncated else ""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise OutputInvalid(f"tool {key} printed JSON nested too deeply to read{cut}", text) from None
    except ValueError as exc:
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        if not text.strip():
            reason, where = "it printed nothing", ""
        message = f"tool {key} declares JSON output, but it is not JSON{where}: {reason}{cut}"
        raise OutputInvalid(message, text) from None
    if output.schema is not None:
        problem = mismatch(output.schema, value)
        if problem is not None:
            raise OutputInvalid(f"tool {key} printed JSON that does not match its output schema: {problem}", text)
    return value


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str) -> Any:
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

    return Draft202012Validator(json.loads(schema_text), format_checker=Draft202012Validator.FORMAT_CHECKER)


def mismatch(schema: dict[str, Any], value: Any) -> str | None:
    """The first place `value` breaks `schema`, in words (`at /items/0/size: 'x' is not of type 'integer'`)."""
    from jsonschema.exceptions import best_match  # type: ignore[import-untyped]
    from referencing.exceptions import Unresolvable

    try:
        first = best_match(_validator(json.dumps(schema, sort_keys=True)).iter_errors(value))
    except Unresolvable as exc:
        return f"the output schema refers to something toolrun cannot resolve ({exc})"
    if first is None:
        return None
    message = first.message if len(first.message) <= _SHOWN else first.message[:_SHOWN] + "…"
    return f"at {pointer(first.absolute_path)}: {message}"


def pointer(path: Any) -> str:
    """A JSON Pointer (RFC 6901) to a place in a value: `/` for the whole of it."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else "/ (the whole output)"


def schema_problem(schema: Any) -> str | None:
    """Why `schema` is not a JSON Schema (2020-12) toolrun can check output against, or None."""
    if not isinstance(schema, dict):
        return "an output schema must be a JSON object (a mapping)"
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"the output schema is not a valid JSON Schema: at {pointer(exc.absolute_path)}: {exc.message}"
    try:
        json.dumps(schema)
    except (TypeError, ValueError) as exc:
        return f"the output schema cannot be written as JSON: {exc}"
    return None


def value_schema(output: Output) -> dict[str, Any]:
    """The JSON Schema of the value a call answers with (an empty schema: any JSON value)."""
    if output.format == "lines":
        return dict(LINES_SCHEMA)
    return dict(output.schema) if output.schema is not None else {}


def mcp_output_schema(output: Output) -> dict[str, Any]:
    """MCP `outputSchema` (an object type): the value's schema when it describes an object, else
    `{result: <value schema>}` (structured content is always an object; `wrapped` says which)."""
    schema = value_schema(output)
    if not wrapped(output):
        return schema
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}


def wrapped(output: Output) -> bool:
    """Whether MCP structured content wraps the value as `{result: value}` (it is not declared an object)."""
    schema = output.schema
    return output.format != "json" or schema is None or schema.get("type") != "object"


def return_type(output: Output | None) -> str:
    """The return type shown in signatures: the value's type, or the failed command's tuple."""
    if output is None or not output.typed:
        return EXEC_RETURN_TYPE
    return f"{type_words(value_schema(output))} | (int, str, str)"


_SIMPLE = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


def type_words(schema: Any, depth: int = 0) -> str:
    """A JSON Schema as a short Python-like type: `{name: str, size?: int}`, `list[str]`, `json`."""
    if not isinstance(schema, dict) or not schema:
        return "json"
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(json.dumps(v) for v in schema["enum"][:6]) + (" | …" if len(schema["enum"]) > 6 else "")
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_SIMPLE.get(k, k) if k not in ("object", "array") else k for k in kind if isinstance(k, str))
    if kind == "array":
        return f"list[{type_words(schema.get('items'), depth + 1)}]"
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, dict) or not props or depth > 2:
            return "dict"
        required = set(schema.get("required") or ())
        fields = [f"{name}{'' if name in required else '?'}: {type_words(s, depth + 1)}" for name, s in props.items()]
        shown = fields[:8] + (["…"] if len(fields) > 8 else [])
        return "{" + ", ".join(shown) + "}"
    if isinstance(kind, str):
        return _SIMPLE.get(kind, kind)
    return "json"


def words(output: Output) -> str:
    """What a typed tool answers, in words (describe, the UI)."""
    if output.format == "lines":
        what = "the lines of the command's standard output, as a list of strings"
    elif output.schema is not None:
        what = "the command's standard output parsed as JSON and checked against the tool's output schema"
    else:
        what = "the command's standard output parsed as JSON"
    return (
        f"{what}, when it exits with code 0 (output that does not parse or match fails the call, the raw text "
        "kept); otherwise the tuple (exit code, stdout, stderr)"
    )
