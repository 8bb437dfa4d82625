"""YAML catalog files -> ToolSpecs.

Load order for one file: read -> YAML (libyaml) -> ``${VAR}`` substitution -> pydantic models ->
checks (exactly one of exec/curl/fn, defaults of the right type, template syntax, declared and
used variables, fn imports) -> ToolSpecs. Problems carry ``file:line:col``; line numbers come
from a node tree composed only when a problem needs one, so a clean load pays nothing for them.
A file whose tools loaded without errors is cached by content hash (plus the hashes of the
environment values and env files it read, and a key derived from the package version and the
fields of the cached record classes), so a warm load skips YAML and checks alike.

The format itself is documented in docs/catalog.md; the JSON Schema in schema/ is generated
from the pydantic models in schema.py.

The package has one module per job: options (LoadOptions, Catalog), source (what a file may be: a
regular file, bounded; its aliases' expansion, bounded), positions, context (LoadContext, the state
one file's load shares, and LoadResult, what it gives back), problems, parse, substitute (``${VAR}``),
paramdefs, templatelint (the lint of templates) over dataflow (where each value lands in the shell command),
fn (introspection), envfiles, exampledefs, sandboxes, build, loader (one file, start to end) and cache.
Each step is a module of plain functions that take the LoadContext.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import CatalogError, Problem
from ..exec.heap import release_free_memory
from ..models import ToolSpec
from .build import example_call
from .cache import cache_key, load_file_cached
from .envfiles import BASE_ENV, DEFAULT_PATH, child_env, parse_env_file
from .fn import resolve_fn
from .options import Catalog, LoadOptions
from .sandboxes import resolve as resolve_sandboxes

__all__ = [
    "BASE_ENV",
    "DEFAULT_PATH",
    "Catalog",
    "LoadOptions",
    "cache_key",
    "check",
    "child_env",
    "example_call",
    "expand",
    "load",
    "parse_env_file",
    "resolve_fn",
]


# -- files -------------------------------------------------------------------------------------


def expand(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files named, and the *.yaml / *.yml files of directories named (sorted, not recursive).

    A file named twice (or also found through its directory) is loaded once.
    """
    files: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        found = (
            sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
            if path.is_dir()
            else [path]
        )
        for file in found:
            real = file.resolve()
            if real not in seen:
                seen.add(real)
                files.append(file)
    return files


def load(
    paths: Sequence[str | os.PathLike[str]],
    environ: Mapping[str, str] | None = None,
    options: LoadOptions | None = None,
) -> Catalog:
    """Load a catalog; raise CatalogError listing every error found."""
    options = options or LoadOptions()
    catalog, problems = check(paths, environ, options)
    if any(p.severity == "error" for p in problems):
        if not options.check:
            # Errors are rare: load again in check mode for exact positions and every finding.
            _, problems = check(paths, environ, replace(options, check=True))
        raise CatalogError([p for p in problems if p.severity == "error"] or problems)
    return catalog


def check(
    paths: Sequence[str | os.PathLike[str]],
    environ: Mapping[str, str] | None = None,
    options: LoadOptions | None = None,
) -> tuple[Catalog, list[Problem]]:
    """Load what loads and return it with every problem (errors and warnings)."""
    environ = os.environ if environ is None else environ
    options = options or LoadOptions()
    problems: list[Problem] = []
    tools: dict[str, ToolSpec] = {}
    files = expand(paths)
    if not files:
        problems.append(Problem("-", 1, 1, "", "no catalog files given"))
    built = False
    declared: list[Any] = []
    for path in files:
        file_tools, file_problems, cold, file_profiles = load_file_cached(path, environ, options)
        built = built or cold
        problems.extend(file_problems)
        declared.extend(file_profiles)
        for tool in file_tools:
            first = tools.get(tool.key)
            if first is not None:
                problems.append(
                    Problem(
                        tool.file,
                        tool.line,
                        tool.col,
                        tool.key,
                        f"duplicate key {tool.key!r} (first defined at {first.file}:{first.line})",
                    )
                )
                continue
            tools[tool.key] = tool
    if built and not options.check:
        release_free_memory()
    tools = resolve_sandboxes(tools, declared, options.sandbox_default, problems, probe=options.check)
    catalog = Catalog(
        tools=dict(sorted(tools.items())),
        warnings=[p for p in problems if p.severity == "warning"],
        files=[str(f) for f in files],
    )
    return catalog, problems
