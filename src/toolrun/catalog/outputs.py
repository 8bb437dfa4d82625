"""A tool's `output:` (typed output of exec and curl tools): the Output record, its schema checked, and a
warning when a `format: json` command obviously prints something else (as far as its text tells)."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from typing import TYPE_CHECKING, Any

import yaml

from ..models import Output
from ..typedoutput import schema_problem

if TYPE_CHECKING:
    from .loadcontext import LoadContext
    from .schema import ToolDef

# Commands that print text of their own and have no JSON mode toolrun knows of, as the last stage of a command.
TEXT_COMMANDS = frozenset(
    {"ls", "df", "du", "ps", "wc", "uptime", "date", "whoami", "hostname", "uname", "free", "id", "pwd", "w", "who"}
)
_JSON_START = re.compile(r"^\s*(?:[\[{\"]|-?\d|true\b|false\b|null\b)")


def output_of(ctx: LoadContext, tool: ToolDef, kind: str, key: str, loc: tuple[Any, ...]) -> Output | None:
    """The tool's Output (None: plain text); problems with its schema; a warning where it does not apply."""
    spec = tool.output
    if spec is None:
        return None
    where = (*loc, "output")
    if kind == "fn":
        message = "`output` applies to exec and curl tools (an fn tool's return type comes from its signature)"
        ctx.problem(where, key, message + "; ignored", "warning")
        return None
    if spec.schema_ is not None and spec.format != "json":
        ctx.problem((*where, "schema"), key, f"`schema` applies with `format: json` only (not {spec.format}); ignored")
        return None
    schema, schema_file = _schema(ctx, spec.schema_, key, (*where, "schema"))
    if spec.format == "json":
        _json_warning(ctx, tool, kind, key, loc)
    return Output(spec.format, schema, schema_file) if spec.format != "text" else None


def _schema(ctx: LoadContext, given: Any, key: str, where: tuple[Any, ...]) -> tuple[dict[str, Any] | None, str]:
    """The schema inline or read from its file (recorded in `ctx.extra_files`), checked as a JSON Schema."""
    if given is None:
        return None, ""
    name = ""
    if isinstance(given, str):
        name = given
        given = _read_schema(ctx, name, key, where)
        if given is None:
            return None, name
    problem = schema_problem(given)
    if problem is not None:
        ctx.problem(where, key, f"{problem}" + (f" (in {name})" if name else ""))
        return None, name
    return given, name


def _read_schema(ctx: LoadContext, name: str, key: str, where: tuple[Any, ...]) -> Any:
    path = (ctx.path.parent / name).resolve()
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
        value = json.loads(text) if path.suffix == ".json" else yaml.load(text, Loader=yaml.CSafeLoader)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
        ctx.problem(where, key, f"cannot read the output schema file {name!r}: {reason}")
        return None
    ctx.extra_files[str(path)] = hashlib.sha256(data).hexdigest()
    return value


def _json_warning(ctx: LoadContext, tool: ToolDef, kind: str, key: str, loc: tuple[Any, ...]) -> None:
    """A `format: json` tool whose command obviously prints something else: say so (code output-not-json)."""
    why = _not_json(tool.exec or "") if kind == "exec" else _curl_not_json(tool.curl or "")
    if why:
        message = f"`output: {{format: json}}`, but {why}: every call would fail"
        ctx.problem((*loc, "output", "format"), key, message, "warning", "output-not-json")


def _last_stage(command: str) -> list[str]:
    """The words of the command's last pipeline stage (of its last line), best effort; [] when unclear."""
    line = command.strip().splitlines()[-1] if command.strip() else ""
    stages = re.split(r"(?<!\|)\|(?!\|)", line)
    try:
        return shlex.split(stages[-1], comments=True)
    except ValueError:
        return []


def _not_json(command: str) -> str:
    words = _last_stage(command)
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if not words or "{{" in words[0] or "{%" in command:
        return ""
    name = words[0].rsplit("/", 1)[-1]
    if name in TEXT_COMMANDS and not any("json" in w.lower() for w in words[1:]):
        return f"its command ends with `{name}`, which prints text, not JSON"
    if name == "echo" and len(words) > 1 and "{{" not in words[1]:
        args = [w for w in words[1:] if not w.startswith("-")]
        if args and not _JSON_START.match(args[0]):
            return f"its command echoes {args[0][:40]!r}, which is not JSON"
    return ""


def _curl_not_json(template: str) -> str:
    try:
        words = shlex.split(template)
    except ValueError:
        return ""
    if "-I" in words or "--head" in words:
        return "its curl asks for the headers only (-I), which are not JSON"
    return ""
