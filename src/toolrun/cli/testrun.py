"""`toolrun test`: run the catalog's examples and report like a test runner."""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated, Any

import typer

from .common import app, fail, load_settings, operator_identity, print_err

FORMATS = ("text", "junit", "github")


@app.command("test")
def test_examples(
    files: Annotated[
        list[str] | None,
        typer.Argument(
            help="Catalog files or directories. Default: $SVC_CATALOG, the config file, ./tools.yaml.",
            show_default=False,
        ),
    ] = None,
    run_all: Annotated[
        bool,
        typer.Option("--all", help="Also run examples of tools that change things (destructive, not read-only)."),
    ] = False,
    output: Annotated[
        str,
        typer.Option(
            "--format", "-f", metavar="FORMAT", help="text, junit (XML for CI test reports) or github (annotations)."
        ),
    ] = "text",
    key: Annotated[
        str | None, typer.Option("--key", "-k", help="Only tools whose key contains this text.", show_default=False)
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Examples run at the same time.")] = 4,
) -> None:
    """Run every tool's `examples:` and check what they give; exit 1 when one fails."""
    import asyncio

    from ..catalog import LoadOptions, examples, load
    from ..errors import ToolrunError, UsageError
    from ..service import ToolService, catalog_paths

    try:
        if output not in FORMATS:
            raise UsageError(f"--format must be text, junit or github, not {output!r}")
        if jobs < 1:
            raise UsageError("--jobs must be 1 or more")
        settings = load_settings()
        paths = catalog_paths(files, settings)
        options = LoadOptions(
            default_timeout=settings.default_timeout,
            max_output=settings.max_output,
            check=True,
            sandbox_default=settings.sandbox_default,  # examples run in the sandbox real calls get
        )
        # check=True: exact file positions for every example (for the reports), as validate-catalog gives.
        service = ToolService(load(paths, os.environ, options))
    except ToolrunError as exc:
        fail(exc)
    tools = [t for t in service.list(operator_identity()) if key is None or key in t.key]
    started = time.perf_counter()
    outcomes: list[Any] = []
    streaming = output != "junit"

    async def main() -> None:
        async for outcome in examples.run(service, operator_identity(), tools, run_unsafe=run_all, jobs=jobs):
            outcomes.append(outcome)
            if streaming:
                sys.stdout.write(examples.text_line(outcome) + "\n")
                sys.stdout.flush()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    seconds = time.perf_counter() - started
    tally = examples.counts(outcomes)
    if output == "junit":
        sys.stdout.write(examples.junit_xml(outcomes, seconds))
    elif output == "github":
        for line in examples.github_lines(outcomes):
            sys.stdout.write(line + "\n")
    summary = examples.summary(outcomes, seconds)
    if not outcomes:
        summary = "no examples" + (f" in tools matching {key!r}" if key else "") + ": add `examples:` to a tool"
    if output == "junit":
        print_err(summary)
    else:
        sys.stdout.write(summary + "\n")
    raise typer.Exit(1 if tally["failed"] or tally["error"] else 0)
