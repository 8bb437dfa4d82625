"""`toolrun validate-catalog`: every problem of catalog files, as text, JSON or GitHub annotations."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from .common import app, fail, load_settings, print_err, print_json


@app.command("validate-catalog")
def validate_catalog(
    files: Annotated[
        list[str] | None,
        typer.Argument(
            help="Catalog files or directories. Default: $SVC_CATALOG, the config file's catalog, ./tools.yaml.",
            show_default=False,
        ),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    output: Annotated[
        str, typer.Option("--format", "-f", metavar="FORMAT", help="text, json, or github (Actions annotations).")
    ] = "text",
) -> None:
    """Check catalog files; one line per problem (`file:line:col: key: message`); exit 1 on errors.

    A warning ends with its name in brackets (`[unquoted-param]`): a tool that means it lists the name in
    `allow_warnings:`. In CI, run it with --strict, so that a new warning fails the build."""
    from ..catalog import LoadOptions, check
    from ..words import plural

    if output not in ("text", "json", "github"):
        print_err(f"toolrun: --format must be text, json or github, not {output!r}")
        raise typer.Exit(2)
    from ..errors import ToolrunError

    try:
        settings = load_settings()
    except ToolrunError as exc:
        fail(exc)
    from ..service import catalog_paths

    options = LoadOptions(
        default_timeout=settings.default_timeout,
        check=True,
        curl_protocols=settings.curl_protocols,
        sandbox_default=settings.sandbox_default,
    )
    paths = files or catalog_paths(None, settings)
    if not files and not settings.catalog and not os.path.exists(paths[0]):
        print_err(
            "toolrun: no catalog: pass FILE, set SVC_CATALOG, set `catalog` in the config file, "
            "or create ./tools.yaml (`toolrun init` writes a starter)"
        )
        raise typer.Exit(2)
    catalog, problems = check(paths, os.environ, options)
    problems.sort(key=lambda p: (p.file, p.line, p.col))
    failing = [p for p in problems if p.severity == "error" or strict]
    if output == "json":
        print_json(
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
                        "code": p.code or None,
                    }
                    for p in problems
                ],
            }
        )
    else:
        for p in problems:
            if output == "github":
                level = "error" if p.severity == "error" or strict else "warning"
                text = f"{p.message} [{p.code}]" if p.code else p.message
                msg = _gh_escape(f"{p.key}: {text}" if p.key else text)
                where = f"file={_gh_escape(p.file, True)},line={p.line},col={p.col}"
                sys.stdout.write(f"::{level} {where}::{msg}\n")
            else:
                sys.stdout.write(str(p) + "\n")
        errors = sum(1 for p in problems if p.severity == "error")
        warnings = len(problems) - errors
        verdict = "invalid" if failing else "valid"
        strictly = " (--strict: warnings fail)" if strict and warnings else ""
        counts = f"{plural(len(catalog.tools), 'tool')}, {plural(errors, 'error')}, {plural(warnings, 'warning')}"
        print_err(f"{verdict}: {counts}{strictly}")
    raise typer.Exit(1 if failing else 0)


def _gh_escape(text: str, prop: bool = False) -> str:
    """GitHub Actions workflow-command escaping (properties also escape `:` and `,`)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text
