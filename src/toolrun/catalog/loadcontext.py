"""One catalog file's load: the context its steps share, and the result it gives back.

`loader.load_file` makes a `LoadContext` for the file and passes it, explicitly, to the plain functions
of each step (parse, substitute, paramdefs, templates, fn, envfiles, exampledefs, sandboxes, build);
each reads the inputs and records what it finds in the fields its docstring gives it. At the end the
context is turned into a `LoadResult`, which is all that leaves the load (the context, with the file's
text and node tree, is dropped).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Problem
from ..models import Sandbox, ToolSpec
from .options import LoadOptions
from .positions import Locator


@dataclass(frozen=True, slots=True)
class Declared:
    """A named sandbox profile as one file declares it: the profile it extends and what it adds
    (sandboxes.resolve finishes it once every file is loaded)."""

    name: str
    sandbox: Sandbox
    file: str
    line: int
    col: int


@dataclass(eq=False)
class LoadContext:
    """One catalog file's load: its inputs, what its steps found so far, and what the cache must check.

    Inputs, set when the load starts and never changed:

    - `path`, `name`: the file, and its name as problems give it (`str(path)`).
    - `environ`: where `${VAR}` values come from. `options`: the LoadOptions of the whole load.

    Found while loading (each field names the steps that write it; every step may read any):

    - `problems`: every error and warning, in the order found. Every step appends, through `problem`
      (at a field of the data) or `problem_at` (at a line and column); `problems.acknowledge` removes
      the warnings a tool's `allow_warnings:` names.
    - `locate`: where a field of the data is written (positions.Locator). Set by loader for the file's
      text; parse replaces it after repairing a YAML syntax error (the lines stay the same).
    - `has_refs`: whether the text holds `${` at all. Set by loader; when False, substitute does not
      walk a tool's fields.
    - `substituted`: data paths of the values in which substitute replaced a `${VAR}`; paramdefs lets
      such a `default:` or `example:` be text where the type says int (the value came from the environment).
    - `used_env`: each variable a `${VAR}` read -> its value (None: not set). Written by substitute.
    - `extra_files`: each other file the tools were built from (an `env_file`, an fn's source) -> the
      sha256 of its content. Written by envfiles and fn.
    - `cacheable`: whether the cache can tell when this file's tools go stale. The cache keys a file on
      its bytes, the options, and the values in `used_env` and `extra_files`; anything else a result
      depends on makes it uncacheable: fn sets it False for a function whose signature comes from no
      readable .py file (a builtin, a C extension). A file is stored only when `cacheable` holds and it
      has no errors (`LoadResult.cacheable`); a check-mode load (validate-catalog) never stores one.
    - `declared`: the named sandbox profiles of the file's `sandboxes:` (Declared). Written
      by sandboxes.declare_profiles; resolved over the whole catalog once every file is loaded.
    - `shared`: one object for each value repeated across the file's tools. Written and read by build.share.
    """

    path: Path
    environ: Mapping[str, str]
    options: LoadOptions
    name: str = ""
    problems: list[Problem] = field(default_factory=list)
    locate: Locator = field(default_factory=lambda: Locator(""))
    has_refs: bool = True
    substituted: set[tuple[Any, ...]] = field(default_factory=set)
    used_env: dict[str, str | None] = field(default_factory=dict)
    extra_files: dict[str, str] = field(default_factory=dict)
    cacheable: bool = True
    declared: list[Declared] = field(default_factory=list)
    shared: dict[tuple[type, Any], Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.name = self.name or str(self.path)

    def problem(self, loc: Sequence[Any], key: str, message: str, severity: str = "error", code: str = "") -> None:
        """A problem with the field at `loc` (positioned at its key); `code`: a warning's WARNING_CODES name."""
        line, col = self.locate.key(loc)
        self.problems.append(Problem(self.name, line, col, key, message, severity, code))

    def problem_at(self, pos: tuple[int, int], key: str, message: str, severity: str = "error", code: str = "") -> None:
        """A problem at (line, column) `pos`."""
        self.problems.append(Problem(self.name, pos[0], pos[1], key, message, severity, code))

    def errors(self) -> int:
        """How many errors were found so far."""
        return sum(1 for p in self.problems if p.severity == "error")

    def result(self, tools: list[ToolSpec]) -> LoadResult:
        """What leaves the load: the file's tools and everything the cache needs of the context."""
        return LoadResult(
            tools=tools,
            problems=self.problems,
            declared=self.declared,
            used_env=self.used_env,
            extra_files=self.extra_files,
            cacheable=self.cacheable and not self.errors(),
        )


@dataclass(frozen=True, eq=False)
class LoadResult:
    """One file's load, done: what `loader.load_file` gives back (the fields as in LoadContext)."""

    tools: list[ToolSpec]  # the tools that loaded without errors, in the file's order
    problems: list[Problem]
    declared: list[Declared]
    used_env: dict[str, str | None]
    extra_files: dict[str, str]
    cacheable: bool  # the cache may store it: LoadContext.cacheable, and no errors
