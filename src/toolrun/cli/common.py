"""What every `toolrun` command shares: the Typer app, the common options, errors to exit codes.

Heavy modules (pydantic models, jinja2, the server stack) load inside the commands that need
them, so `toolrun --help` stays fast. Errors map to exit codes in one place, `fail`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from .fastcoerce import install_fast_coercion
from .helpwords import install_help_words

if TYPE_CHECKING:
    from ..access import Access
    from ..models import Identity
    from ..service import ToolService
    from ..settings import Settings

install_fast_coercion()
install_help_words()


def _install_bash_script() -> None:
    """Typer's bash completion script, plus: a lone `name=` answer gets no space after it (its value
    comes next). `--show-completion`, `--install-completion` and completions/ all use it."""
    try:
        from typer import _completion_shared
    except Exception:  # pragma: no cover - a Typer without this module
        return
    scripts = getattr(_completion_shared, "_completion_scripts", None)
    if isinstance(scripts, dict) and "bash" in scripts:
        scripts["bash"] = BASH_SCRIPT


BASH_SCRIPT = """
%(complete_func)s() {
    local IFS=$'\\n'
    COMPREPLY=( $( env COMP_WORDS="${COMP_WORDS[*]}" \\
                   COMP_CWORD=$COMP_CWORD \\
                   %(autocomplete_var)s=complete_bash $1 ) )
    if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *= ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}

complete -o default -F %(complete_func)s %(prog_name)s
"""
_install_bash_script()

_SERVER_OPTIONS = ("--url", "--api-key")
REMOTE_COMMANDS = ("list", "describe", "call", "search", "jobs")  # the commands toolrun's --url applies to
# toolrun's own `--url` and `--api-key` (or $TOOLRUN_URL, $TOOLRUN_API_KEY): the default server of client.open_client.
SERVER: dict[str, str | None] = {"url": None, "api_key": None}


def hoist_server_options(args: list[str]) -> list[str]:
    """`toolrun search disk --url URL` means `toolrun --url URL search disk`: toolrun's own `--url` and
    `--api-key`, written after a command they apply to, move before it (up to a `--`)."""
    i = 0
    while i < len(args) and args[i].startswith("-"):  # toolrun's own options come first
        i += 2 if args[i] in _SERVER_OPTIONS else 1
    if i >= len(args) or args[i] not in REMOTE_COMMANDS:
        return args
    moved: list[str] = []
    rest = args[: i + 1]
    words = iter(args[i + 1 :])
    for word in words:
        if word == "--":
            rest += [word, *words]
            break
        name = word.split("=", 1)[0]
        if name in _SERVER_OPTIONS and "=" in word:
            moved.append(word)
        elif word in _SERVER_OPTIONS:
            value = next(words, None)
            if value is None:
                rest.append(word)
                break
            moved += [word, value]
        else:
            rest.append(word)
    return [*moved, *rest]


class _ToolrunGroup(TyperGroup):
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # click.Context (typer bundles its own click)
        return super().parse_args(ctx, hoist_server_options(args))


app = typer.Typer(
    cls=_ToolrunGroup,
    name="toolrun",
    help="Run the tools of a YAML catalog from the terminal, over HTTP and MCP, and in a browser.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        from .. import __version__

        sys.stdout.write(f"toolrun {__version__}\n")
        raise typer.Exit(0)


CatalogOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--catalog",
        "-c",
        metavar="FILE",
        help="Catalog file or directory (repeatable). Default: $SVC_CATALOG, the config file, ./tools.yaml.",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def print_err(message: str) -> None:
    """One line on stderr (a message without its newline gets one)."""
    sys.stderr.write(message.rstrip("\n") + "\n")


def fail(exc: BaseException) -> NoReturn:
    """The one place CLI errors become messages and exit codes."""
    from ..errors import CatalogError, ToolFailed, ToolrunError

    if isinstance(exc, CatalogError):
        for problem in exc.problems:
            print_err(str(problem))
        raise typer.Exit(exc.exit_code)
    if isinstance(exc, ToolFailed):
        print_err(f"toolrun: {exc.summary}")
        raise typer.Exit(exc.exit_code)
    if isinstance(exc, ToolrunError):
        print_err(f"toolrun: {exc}")
        raise typer.Exit(exc.exit_code)
    raise exc


def load_settings(flags: dict[str, Any] | None = None) -> Settings:
    from ..settings import Settings

    return Settings.load(flags or {})


def make_service(catalog: list[str] | None, settings: Settings | None = None, **kwargs: Any) -> ToolService:
    """The one ToolService, on the catalog from --catalog, $SVC_CATALOG, the config file or ./tools.yaml;
    raises ToolrunError (CatalogError, UsageError)."""
    from ..errors import UsageError
    from ..service import ToolService, catalog_paths

    settings = settings or load_settings()
    paths = catalog_paths(catalog, settings)
    if not catalog and not settings.catalog and not Path(paths[0]).exists():
        raise UsageError(
            "no catalog: pass --catalog FILE, set SVC_CATALOG, set `catalog` in the config file, "
            "or create ./tools.yaml (`toolrun init` writes a starter)"
        )
    return ToolService.from_paths(paths, settings, **kwargs)


# -- the server of `toolrun --url URL [--api-key KEY] list|describe|call|search|jobs` ------------------


@app.callback()
def _root(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            envvar="TOOLRUN_URL",
            metavar="URL",
            help="Run list, describe, call and search on this toolrun server (over its REST routes).",
            show_default=False,
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="TOOLRUN_API_KEY",
            metavar="KEY",
            help="API key sent to the --url server.",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", "-V", help="Print the version and exit.", callback=_show_version, is_eager=True),
    ] = False,
) -> None:
    """Run the tools of a YAML catalog from the terminal, over HTTP and MCP, and in a browser."""
    SERVER.update(url=url or None, api_key=api_key or None)
    typed = getattr(ctx.get_parameter_source("url"), "name", "") == "COMMANDLINE"
    if url and typed and ctx.invoked_subcommand not in (*REMOTE_COMMANDS, "access"):
        print_err(
            f"toolrun: --url applies to {', '.join(REMOTE_COMMANDS)} and access explain; "
            f"`{ctx.invoked_subcommand}` runs locally"
        )
        raise typer.Exit(2)


def open_access() -> Access:
    """Identity and keys as the server sees them (the key store of the settings)."""
    from ..access import Access

    return Access.from_settings(load_settings())


def operator_identity() -> Identity:
    """The CLI's caller on this machine: the catalog's owner, who may call every tool."""
    from ..models import Identity

    return Identity.operator()


def exit_code(returncode: int, timed_out: bool) -> int:
    """A command's exit code as `toolrun call` exits with it: 124 for a timeout, 128+N for signal N."""
    if timed_out:
        return 124
    if returncode < 0:
        return 128 + (-returncode)
    return min(returncode, 255)


def print_json(data: Any) -> None:
    """`--json`: indented, non-ASCII kept as it is."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
