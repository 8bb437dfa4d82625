"""What every `toolrun` command shares: the Typer app, the common options, errors to exit codes.

Heavy modules (pydantic models, jinja2, the server stack) load inside the commands that need
them, so `toolrun --help` stays fast. Errors map to exit codes in one place, `_fail`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from .fastcoerce import _install_fast_coercion

if TYPE_CHECKING:
    from ..service import ToolService
    from ..settings import Settings

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
    from ..errors import CatalogError, ToolFailed, ToolrunError

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
    from ..settings import Settings

    return Settings.load(flags or {})


def _service(catalog: list[str] | None, settings: Settings | None = None, **kwargs: Any) -> ToolService:
    """The one ToolService, on the catalog from --catalog, $SVC_CATALOG, the config file or ./tools.yaml."""
    from ..errors import ToolrunError, UsageError
    from ..service import ToolService, catalog_paths

    try:
        settings = settings or _settings()
        paths = catalog_paths(catalog, settings)
        if not catalog and not settings.catalog and not Path(paths[0]).exists():
            raise UsageError(
                "no catalog: pass --catalog FILE, set SVC_CATALOG, set `catalog` in the config file, "
                "or create ./tools.yaml"
            )
        return ToolService.from_paths(paths, settings, **kwargs)
    except ToolrunError as exc:
        _fail(exc)


def _operator() -> Any:
    from ..models import Identity

    return Identity.operator()


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
