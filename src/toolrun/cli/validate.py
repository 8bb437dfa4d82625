"""`toolrun validate-catalog`: every problem of catalog files, as text, JSON or GitHub annotations."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from .common import _err, _fail, _print_json, _settings, app


@app.command("validate-catalog")
def validate_catalog(
    files: Annotated[list[str], typer.Argument(help="Catalog files or directories.")],
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    output: Annotated[
        str, typer.Option("--format", "-f", help="text, json, or github (Actions annotations).")
    ] = "text",
) -> None:
    """Check catalog files; one line per problem (`file:line:col: key: message`); exit 1 on errors."""
    from ..catalog import LoadOptions, check

    if output not in ("text", "json", "github"):
        _err(f"toolrun: --format must be text, json or github, not {output!r}")
        raise typer.Exit(2)
    from ..errors import ToolrunError

    try:
        settings = _settings()
    except ToolrunError as exc:
        _fail(exc)
    options = LoadOptions(
        default_timeout=settings.default_timeout,
        check=True,
        curl_protocols=settings.curl_protocols,
        sandbox_default=settings.sandbox_default,
    )
    catalog, problems = check(files, os.environ, options)
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
