"""The shape of the code: doors stay thin, modules small, one route table.

Doors (src/toolrun/cli/, src/toolrun/server/) find who is calling through toolrun.access and what
a caller may see through ToolService; they never open a key store or read `service.registry`.
ruff enforces the imports (src/toolrun/{cli,server}/ruff.toml); these tests check the attribute
reads ruff cannot see, that the ruff rules really fire (banned imports, complexity at most 15), and that
no module uses another module's underscore names.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "toolrun"
DOORS = sorted([*(SRC / "cli").rglob("*.py"), *(SRC / "server").rglob("*.py")])
KEY_STORES = {
    "toolrun.state.open_keys",
    "toolrun.state.KeyStore",
    "toolrun.state.kinds.KeyStore",
    "toolrun.state.memory",
    "toolrun.state.sqlite",
    "toolrun.state.redis",
    "toolrun.state.shared_memory",
    "toolrun.registry",
}


def _package(path: Path) -> str:
    """The package a file's relative imports start from (a package's own for its `__init__.py`)."""
    return ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])


def _from(package: str, node: ast.ImportFrom) -> str:
    """The module a `from ... import` statement reads from, a relative one resolved against `package`."""
    base = node.module or ""
    if not node.level:
        return base
    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*parent, base] if base else parent)


def _imports(path: Path) -> set[str]:
    """Every module and module.name a file imports, relative imports resolved."""
    package = _package(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _from(package, node)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def test_the_doors_are_found() -> None:
    names = {p.relative_to(SRC).as_posix() for p in DOORS}
    assert {"cli/keys.py", "server/app.py", "server/mcp/door.py", "server/run.py"} <= names


@pytest.mark.parametrize("path", DOORS, ids=lambda p: p.relative_to(SRC).as_posix())
def test_a_door_never_reads_the_registry_of_the_service(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    reads = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "registry"]
    assert not reads, f"{path.name} reads `.registry` at lines {reads}: ask the ToolService instead"


@pytest.mark.parametrize("path", DOORS, ids=lambda p: p.relative_to(SRC).as_posix())
def test_a_door_never_imports_a_key_store(path: Path) -> None:
    assert not _imports(path) & KEY_STORES


@pytest.mark.parametrize(
    "source",
    [
        "from ..state.redis import RedisKeyStore\n",
        "from ..state.sqlite import SQLiteKeyStore\n",
        "from ..state import open_keys\n",
        "import toolrun.registry\n",
    ],
)
@pytest.mark.parametrize("door", ["cli", "server"])
def test_ruff_refuses_a_key_store_import_in_a_door(door: str, source: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--stdin-filename", str(SRC / door / "probe.py"), "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=SRC.parent.parent,
        check=False,
    )
    assert done.returncode == 1 and "TID251" in done.stdout, done.stdout + done.stderr
    # The same import in the core is allowed.
    core = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--stdin-filename", str(SRC / "probe.py"), "-"],
        input=source.replace("..", "."),
        capture_output=True,
        text=True,
        cwd=SRC.parent.parent,
        check=False,
    )
    assert "TID251" not in core.stdout, core.stdout


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _reaches_into_others(path: Path) -> list[str]:
    """Underscore names this module takes from another toolrun module: by import, or as `module._name`."""
    own, package = _module_name(path), _package(path)
    modules: dict[str, str] = {}  # local name -> the toolrun module it is bound to
    found: list[str] = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _from(package, node)
            if not base.startswith("toolrun"):
                continue
            for alias in node.names:
                if _private(alias.name) and base != own:
                    found.append(f"line {node.lineno}: from {base} import {alias.name}")
                modules[alias.asname or alias.name] = f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("toolrun") and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and (SRC.parent / (modules[node.value.id].replace(".", "/") + ".py")).exists()
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: p.relative_to(SRC).as_posix())
def test_no_module_takes_another_modules_underscore_names(path: Path) -> None:
    """A name used across modules is public in the module that owns it."""
    found = _reaches_into_others(path)
    assert not found, f"{path.relative_to(SRC)} uses private names of other modules: {found}"


def test_the_underscore_check_fires(tmp_path: Path) -> None:
    probe = SRC / "cli" / "probe_underscore.py"
    try:
        probe.write_text("from .common import _err\nfrom .. import params\nparams._x\n", encoding="utf-8")
        found = _reaches_into_others(probe)
    finally:
        probe.unlink()
    assert found == ["line 1: from toolrun.cli.common import _err", "line 3: params._x"]


def test_ruff_holds_functions_in_src_to_complexity_15() -> None:
    source = "def f(x):\n" + "".join(f"    if x == {i}:\n        return {i}\n" for i in range(16)) + "    return 0\n"
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--stdin-filename", str(SRC / "probe.py"), "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=SRC.parent.parent,
        check=False,
    )
    assert done.returncode == 1 and "C901" in done.stdout and "(17 > 15)" in done.stdout, done.stdout + done.stderr


def test_the_router_and_openapi_json_come_from_the_one_route_table(tmp_path: Path) -> None:
    from starlette.routing import Route

    from toolrun.server.openapi import SECURITY, document
    from toolrun.server.routes import ROUTES
    from toolrun.server.run import build_app
    from toolrun.settings import Settings

    catalog = tmp_path / "tools.yaml"
    catalog.write_text("group: ops\ntools:\n  - name: a\n    exec: 'true'\n", encoding="utf-8")
    app = build_app(Settings.load(environ={"TOOLRUN_HOME": str(tmp_path)}), [str(catalog)]).app
    served = [
        (r.path, m) for r in app.routes if isinstance(r, Route) and r.methods for m in sorted(r.methods - {"HEAD"})
    ]
    rows = [(r.starlette_path, r.method) for r in ROUTES]
    assert served[: len(rows)] == rows  # in the table's order, the hot route first
    paths = document(ROUTES)["paths"]
    assert {(p, m.upper()) for p, ops in paths.items() for m in ops} == {
        (r.path, r.method) for r in ROUTES if r.documented
    }
    for r in ROUTES:
        if r.documented:
            assert paths[r.path][r.method.lower()]["security"] == SECURITY[r.auth]
