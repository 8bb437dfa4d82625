"""The `toolrun` command: parse, call the one in-process ToolService, print.

Heavy modules (pydantic models, jinja2, the server stack) load inside the commands that need
them, so `toolrun --help` stays fast. Errors map to exit codes in one place, `_fail`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:
    from .service import ToolService
    from .settings import Settings


def _install_fast_coercion() -> None:
    """Coerce plain str/int/float/bool/list[str] options without pydantic.

    Typer 0.29 builds a pydantic TypeAdapter for every non-flag parameter, which imports pydantic
    and costs ~70-120 ms per command; our options are all plain scalars or lists of strings, so a
    tiny coercion does the same job. Any other annotation (or a Typer without this hook) falls
    back to Typer's own machinery, so a Typer upgrade can only make us slower, never wrong.
    """
    try:
        from dataclasses import dataclass as _dataclass
        from types import NoneType, UnionType
        from typing import Union, get_args, get_origin

        from typer import core as typer_core
        from typer._click.exceptions import BadParameter
        from typer._coercion import RuntimeParam
    except Exception:  # pragma: no cover - a Typer without these internals
        return
    original = getattr(typer_core._TyperParameter, "get_runtime_param", None)
    if original is None:  # pragma: no cover
        return

    def simple(annotation: Any) -> tuple[type, bool] | None:
        if get_origin(annotation) in (Union, UnionType):
            args = [a for a in get_args(annotation) if a is not NoneType]
            if len(args) != 1:
                return None
            annotation = args[0]
        if annotation in (str, int, float, bool):
            return annotation, False
        if get_origin(annotation) is list and get_args(annotation) == (str,):
            return str, True
        return None

    @_dataclass(frozen=True)
    class FastParam(RuntimeParam):
        kind: type = str
        many: bool = False

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if self.many:
                return [str(v) for v in value]
            if isinstance(value, self.kind) and not (self.kind is int and isinstance(value, bool)):
                return value
            if self.kind is bool:
                text = str(value).strip().lower()
                if text in ("1", "true", "yes", "on", "y", "t"):
                    return True
                if text in ("0", "false", "no", "off", "n", "f"):
                    return False
            else:
                try:
                    return self.kind(value)
                except (TypeError, ValueError):
                    pass
            raise BadParameter(f"{value!r} is not a valid {self.kind.__name__}.", ctx=ctx, param=param)

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            desc = self.type_descriptor
            info = desc.parameter_info
            found = simple(desc.annotation)
            plain = getattr(info, "min", None) is None and getattr(info, "max", None) is None
            if found is not None and plain and not desc.is_choice and not desc.is_file and not desc.is_path:
                self._runtime_param = FastParam(
                    parameter_info=info, annotation=desc.annotation, kind=found[0], many=found[1]
                )
        return original(self)

    setattr(typer_core._TyperParameter, "get_runtime_param", get_runtime_param)  # noqa: B010


_install_fast_coercion()

app = typer.Typer(
    name="toolrun",
    help="Run the tools of a YAML catalog from the terminal, over HTTP and MCP, and in a browser.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

CatalogOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--catalog",
        "-c",
        help="Catalog file or directory (repeatable). Default: $SVC_CATALOG, the config file, ./tools.yaml.",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _err(message: str) -> None:
    sys.stderr.write(message.rstrip("\n") + "\n")


def _fail(exc: BaseException) -> NoReturn:
    """The one place CLI errors become messages and exit codes."""
    from .errors import CatalogError, ToolFailed, ToolrunError

    if isinstance(exc, CatalogError):
        for problem in exc.problems:
            _err(str(problem))
        raise typer.Exit(exc.exit_code)
    if isinstance(exc, ToolFailed):
        _err(f"toolrun: {exc.summary}")
        raise typer.Exit(exc.exit_code)
    if isinstance(exc, ToolrunError):
        _err(f"toolrun: {exc}")
        raise typer.Exit(exc.exit_code)
    raise exc


def _settings(flags: dict[str, Any] | None = None) -> Settings:
    from .settings import Settings

    return Settings.load(flags or {})


def _service(catalog: list[str] | None, settings: Settings | None = None, **kwargs: Any) -> ToolService:
    """The one ToolService, on the catalog from --catalog, $SVC_CATALOG, the config file or ./tools.yaml."""
    from .errors import ToolrunError, UsageError
    from .service import ToolService, catalog_paths

    try:
        settings = settings or _settings()
        paths = catalog_paths(catalog, settings)
        if not catalog and not settings["catalog"] and not Path(paths[0]).exists():
            raise UsageError(
                "no catalog: pass --catalog FILE, set SVC_CATALOG, set `catalog` in the config file, "
                "or create ./tools.yaml"
            )
        return ToolService.from_paths(paths, settings, **kwargs)
    except ToolrunError as exc:
        _fail(exc)


def _operator() -> Any:
    from .models import Identity

    return Identity.operator()


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


@app.command("list")
def list_tools(
    catalog: CatalogOpt = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only tools tagged with this group.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the catalog's tools: key, groups and the first line of each description."""
    service = _service(catalog)
    tools = service.list(_operator(), group)
    if as_json:
        _print_json([t.entry() for t in tools])
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # Keys and groups are never cut; only the description gives way on a narrow terminal, and a
    # pipe gets whole lines (rich would otherwise assume 80 columns).
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("key", style="cyan", no_wrap=True, min_width=max((len(t.key) for t in tools), default=3))
    groups = [", ".join(t.groups) for t in tools]
    table.add_column("groups", no_wrap=True, min_width=max((len(g) for g in groups), default=6))
    table.add_column("description", no_wrap=True, overflow="ellipsis")
    for tool, tags in zip(tools, groups, strict=True):
        table.add_row(escape(tool.key), escape(tags), escape(tool.summary))
    Console(width=None if sys.stdout.isatty() else 100_000).print(table)
    if not tools:
        _err("no tools" + (f" in group {group!r}" if group else ""))


@app.command()
def describe(
    key: Annotated[str, typer.Argument(help="Tool key, e.g. ops.disk_usage.")],
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a tool: signature, params, return type, description and an example call."""
    from .errors import ToolrunError
    from .formatting import signature

    service = _service(catalog)
    try:
        tool = service.describe(_operator(), key)
    except ToolrunError as exc:
        _fail(exc)
    if as_json:
        _print_json(tool.entry())
        return
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    console.print(f"[bold cyan]{escape(signature(tool))}[/]", soft_wrap=True)
    console.print(
        f"groups: {escape(', '.join(tool.groups))}    kind: {tool.kind}    returns: {escape(tool.return_type)}"
    )
    if tool.description.strip():
        console.print()
        console.print(Markdown(tool.description))
    if tool.params:
        table = Table(header_style="bold")
        for col in ("param", "type", "required", "default", "description"):
            table.add_column(col)
        for p in tool.params:
            default = "" if p.default is None else json.dumps(p.default, ensure_ascii=False)
            table.add_row(escape(p.name), p.type, "yes" if p.required else "no", escape(default), escape(p.description))
        console.print()
        console.print(table)
    console.print()
    console.print(f"example: {escape(tool.example)}", soft_wrap=True)


def _exit_code(returncode: int, timed_out: bool) -> int:
    if timed_out:
        return 124
    if returncode < 0:
        return 128 + (-returncode)
    return min(returncode, 255)


@app.command()
def call(
    key: Annotated[str, typer.Argument(help="Tool key, e.g. ops.disk_usage.")],
    args: Annotated[
        list[str] | None,
        typer.Argument(help="name=value (coerced to the declared type) or name:=<json>.", show_default=False),
    ] = None,
    catalog: CatalogOpt = None,
    input_file: Annotated[
        str | None,
        typer.Option("--input", "-i", help="Read all arguments as one JSON object from a file, or - for stdin."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would run, and run nothing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Call a tool. The result goes to stdout verbatim; a failed command exits with its own code."""
    import asyncio

    from .errors import ToolrunError, UsageError
    from .params import parse_cli_args

    service = _service(catalog)
    identity = _operator()
    try:
        tool = service.describe(identity, key)
        values: dict[str, Any] = {}
        if input_file is not None:
            text = sys.stdin.read() if input_file == "-" else _read_text(input_file)
            try:
                loaded = json.loads(text) if text.strip() else {}
            except ValueError as exc:
                raise UsageError(f"--input: not valid JSON ({exc})") from None
            if not isinstance(loaded, dict):
                raise UsageError("--input: expected a JSON object of parameter name to value")
            values.update(loaded)
        values.update(parse_cli_args(tool, args or []))
        if dry_run:
            plan = service.plan(identity, key, values)
            if as_json:
                _print_json(plan)
            else:
                sys.stdout.write(_plan_text(plan))
            return
        result = _run_with_spinner(asyncio, service.call(identity, key, values), key)
    except ToolrunError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    from .formatting import result_json, result_text, structured_result

    ex = result.exec
    if as_json:
        # The MCP structured form, plus `result` for every kind and the wall time.
        payload = {**structured_result(result), "seconds": round(result.seconds, 6)}
        payload.setdefault("result", result_json(result.value))
        if ex is not None:
            payload["truncated"] = ex.truncated
        _print_json(payload)
        raise typer.Exit(0 if result.ok else _exit_code(ex.returncode if ex else 1, bool(ex and ex.timed_out)))
    if ex is not None and not result.ok:
        sys.stdout.write(ex.stdout)
        sys.stdout.flush()
        sys.stderr.write(ex.stderr if ex.stderr.endswith("\n") or not ex.stderr else ex.stderr + "\n")
        raise typer.Exit(_exit_code(ex.returncode, ex.timed_out))
    text = result_text(result.value)
    sys.stdout.write(text)
    if ex is None and text and not text.endswith("\n"):
        sys.stdout.write("\n")


def _plan_text(plan: dict[str, Any]) -> str:
    """`--dry-run` as text: one `name: value` line each; the command last, verbatim."""
    lines: list[str] = []
    command = plan.get("command")
    for name, value in plan.items():
        if name == "command":
            continue
        if name == "env":
            shown = " ".join(value) + "  (names only; values are never shown)"
        elif name == "stdin" and value is None:
            shown = "(none: /dev/null)"
        elif name == "limits":
            shown = ", ".join(f"{k}={v}" for k, v in value.items()) or "(none)"
        elif name == "timeout":
            shown = f"{value:g}s"
        else:
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{name}: {shown}")
    text = "\n".join(lines) + "\n"
    if command is not None:
        body = command.rstrip("\n")
        text += f"command:\n{body}\n" if "\n" in body else f"command: {body}\n"
    return text


def _read_text(path: str) -> str:
    from .errors import UsageError

    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--input {path}: {exc}") from None


def _run_with_spinner(asyncio: Any, coro: Any, key: str) -> Any:
    if not sys.stderr.isatty():
        return asyncio.run(coro)

    async def with_spinner() -> Any:
        task = asyncio.ensure_future(coro)
        done, _ = await asyncio.wait({task}, timeout=0.5)
        if done:
            return task.result()
        from rich.console import Console
        from rich.markup import escape

        with Console(stderr=True).status(f"running {escape(key)}…"):
            return await task

    return asyncio.run(with_spinner())


@app.command("validate-catalog")
def validate_catalog(
    files: Annotated[list[str], typer.Argument(help="Catalog files or directories.")],
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    output: Annotated[
        str, typer.Option("--format", "-f", help="text, json, or github (Actions annotations).")
    ] = "text",
) -> None:
    """Check catalog files; one line per problem (`file:line:col: key: message`); exit 1 on errors."""
    from .catalog import LoadOptions, check

    if output not in ("text", "json", "github"):
        _err(f"toolrun: --format must be text, json or github, not {output!r}")
        raise typer.Exit(2)
    from .errors import ToolrunError

    try:
        settings = _settings()
    except ToolrunError as exc:
        _fail(exc)
    catalog, problems = check(files, os.environ, LoadOptions(default_timeout=settings["default_timeout"], check=True))
    problems.sort(key=lambda p: (p.file, p.line, p.col))
    failing = [p for p in problems if p.severity == "error" or strict]
    if output == "json":
        _print_json(
            {
                "valid": not failing,
                "tools": len(catalog.tools),
                "problems": [
                    {
                        "file": p.file,
                        "line": p.line,
                        "col": p.col,
                        "key": p.key,
                        "severity": p.severity,
                        "message": p.message,
                    }
                    for p in problems
                ],
            }
        )
    else:
        for p in problems:
            if output == "github":
                level = "error" if p.severity == "error" or strict else "warning"
                msg = _gh_escape(f"{p.key}: {p.message}" if p.key else p.message)
                where = f"file={_gh_escape(p.file, True)},line={p.line},col={p.col}"
                sys.stdout.write(f"::{level} {where}::{msg}\n")
            else:
                sys.stdout.write(str(p) + "\n")
        errors = sum(1 for p in problems if p.severity == "error")
        warnings = len(problems) - errors
        verdict = "invalid" if failing else "valid"
        strictly = " (--strict: warnings fail)" if strict and warnings else ""
        _err(f"{verdict}: {len(catalog.tools)} tools, {errors} errors, {warnings} warnings{strictly}")
    raise typer.Exit(1 if failing else 0)


def _gh_escape(text: str, prop: bool = False) -> str:
    """GitHub Actions workflow-command escaping (properties also escape `:` and `,`)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def main() -> None:
    """The console script: run the command, flush, and leave without interpreter teardown.

    Tearing down the modules a command imported (typer, jinja2, asyncio, the server stack) costs
    tens of milliseconds, a quarter of a `toolrun call`, and a worker thread of a timed-out fn tool
    would even hold the exit up. Everything a command writes is flushed first; an unexpected
    exception still ends the normal way, with its traceback.
    """
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        app()
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    except KeyboardInterrupt:
        status = 130
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


# `serve` and `keys` live in their own module (registered here so --help lists them).
from . import cli_serve  # noqa: E402, F401
