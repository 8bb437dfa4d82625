"""The core's layers: every import in src/toolrun points down the map below, and no import cycle remains.

Beside tests/test_layout.py (the doors stay thin). Every import counts: at module level, inside functions, and
under `if TYPE_CHECKING:` (a type a module names is a dependency of its design). There is no exception list: a
module that needs something from a higher layer gets it passed in, or the thing moves down.

The map, lowest first (docs: /work/shared/ARCHITECTURE.md, "Dependencies point one way"):

  base                errors, models, settings, and the plain helpers they stand on (words, paramtypes,
                      typedoutput, speedups, context, the package itself)
  engines             params, exec/, search/, state/, telemetry/, formatting (text forms of results and tools),
                      the registry (a loaded catalog's tools, the views of its callers, their search indexes)
  catalog and access  catalog/, access/, jobrecord (a job's record and its digest)
  service             jobs (the job engine), then service (ToolService, the one API of the doors)
  doors               cli/, server/, complete (shell completion), launch and __main__

A module may import from its own layer and the layers below it; within a layer the imports must still form no
cycle, and `jobs` sits below `service` (the service runs jobs; jobs never call back into the service).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "toolrun"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        (
            "toolrun",
            "toolrun.errors",
            "toolrun.words",
            "toolrun.models",
            "toolrun.settings",
            "toolrun.paramtypes",
            "toolrun.typedoutput",
            "toolrun.speedups",
            "toolrun.context",
        ),
    ),
    (
        "engines",
        (
            "toolrun.params",
            "toolrun.exec",
            "toolrun.search",
            "toolrun.state",
            "toolrun.telemetry",
            "toolrun.formatting",
            "toolrun.registry",
        ),
    ),
    ("catalog and access", ("toolrun.catalog", "toolrun.access", "toolrun.jobrecord")),
    ("jobs", ("toolrun.jobs",)),
    ("service", ("toolrun.service",)),
    ("doors", ("toolrun.cli", "toolrun.server", "toolrun.complete", "toolrun.launch", "toolrun.__main__")),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest prefix that names `module` (-1: on no layer)."""
    best, found = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    return found


def imported(module: str, source: str, is_package: bool, known: Iterable[str]) -> dict[str, int]:
    """The toolrun modules `source` imports (module level, in functions, under TYPE_CHECKING), each with the first
    line that does. `from .x import name` counts `x.name` when that is a module, else `x`."""
    names = set(known)
    package = module if is_package else module.rpartition(".")[0]
    found: dict[str, int] = {}

    def owner(name: str) -> str:
        while name and name not in names:
            name = name.rpartition(".")[0]
        return name

    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [owner(alias.name) for alias in node.names if alias.name.split(".")[0] == "toolrun"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            if base.split(".")[0] == "toolrun":
                targets = [owner(f"{base}.{alias.name}") for alias in node.names]
        for target in targets:
            if target and target != module:
                found.setdefault(target, node.lineno)
    return found


def import_graph() -> dict[str, dict[str, int]]:
    return {
        name: imported(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", MODULES)
        for name, path in MODULES.items()
    }


def upward(graph: Mapping[str, Mapping[str, int]]) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        for target, line in sorted(targets.items()):
            if layer_of(target) > layer_of(module):
                found.append(
                    f"{module}:{line} imports {target} ({LAYERS[layer_of(module)][0]} -> {LAYERS[layer_of(target)][0]})"
                )
    return found


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next((w for w in edges if w in graph), None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_module_is_on_a_layer() -> None:
    assert len(MODULES) > 100
    assert [m for m in MODULES if layer_of(m) < 0] == []


def test_no_import_points_up_a_layer() -> None:
    assert upward(import_graph()) == []


def test_no_import_cycle_remains() -> None:
    assert cycles(import_graph()) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from .access.oauth import check\n", {"toolrun.access.oauth": 1}),
        ("def f():\n    from .service import ToolService\n", {"toolrun.service": 2}),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .jobs import Jobs\n",
            {"toolrun.jobs": 3},
        ),
        ("import toolrun.exec.sandbox\n", {"toolrun.exec.sandbox": 1}),
        ("from . import jobs, words\n", {"toolrun.jobs": 1, "toolrun.words": 1}),
    ],
)
def test_the_check_sees_every_kind_of_import(source: str, expected: dict[str, int]) -> None:
    """From `toolrun/models.py`: each of these is an import of a higher layer (but words), and is counted."""
    found = imported("toolrun.models", source, False, MODULES)
    assert found == expected
    ups = upward({"toolrun.models": found})
    assert len(ups) == len([t for t in expected if t != "toolrun.words"])


def test_the_cycle_check_finds_a_cycle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
