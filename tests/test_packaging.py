"""Packaging: the entry points run, and a wheel carries the package."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("list", "describe", "call", "validate-catalog")


def _run(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)


def test_python_dash_m_toolrun_prints_help() -> None:
    done = _run([sys.executable, "-m", "toolrun", "--help"])
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout


def test_console_script_is_installed_next_to_the_interpreter() -> None:
    script = Path(sys.executable).parent / "toolrun"
    assert script.is_file(), f"{script} missing: pip install -e ."


def test_console_script_help_lists_every_core_command() -> None:
    done = _run([str(Path(sys.executable).parent / "toolrun"), "--help"])
    assert done.returncode == 0, done.stderr
    for command in COMMANDS:
        assert command in done.stdout, f"{command!r} missing from toolrun --help"


def test_help_does_not_import_the_server_stack() -> None:
    probe = (
        "import sys\n"
        "from toolrun.cli import app\n"
        "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('starlette', 'uvicorn', 'mcp') if m in sys.modules)\n"
        "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
    )
    done = _run([sys.executable, "-c", probe])
    assert "HEAVY=" in done.stderr, done.stderr
    assert done.stderr.rsplit("HEAVY=", 1)[1].strip() == "", "toolrun --help imported the server stack"


def test_package_version_is_declared() -> None:
    import toolrun

    assert toolrun.__version__.count(".") >= 2


def _build_wheel(out: Path) -> subprocess.CompletedProcess[str]:
    """`pip wheel` of the checkout; offline and quick when hatchling is installed (make test installs it)."""
    args = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q", "-w", str(out)]
    if importlib.util.find_spec("hatchling") is not None:
        args.append("--no-build-isolation")
    return _run([*args, str(ROOT)], timeout=120)


@pytest.mark.timeout(150)
def test_wheel_contains_every_package_module_and_the_console_script(tmp_path: Path) -> None:
    done = _build_wheel(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    wheels = list(tmp_path.glob("toolrun-*.whl"))
    assert len(wheels) == 1, wheels
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        entry_points = next((n for n in names if n.endswith(".dist-info/entry_points.txt")), None)
        assert entry_points is not None, sorted(names)
        scripts = wheel.read(entry_points).decode()
    for path in sorted((ROOT / "src" / "toolrun").rglob("*.py")):
        name = path.relative_to(ROOT / "src").as_posix()
        assert name in names, f"{name} missing from the wheel"
    assert "toolrun = toolrun.cli:main" in scripts


def test_a_warm_call_never_imports_pydantic_or_the_server_stack(tmp_path: Path) -> None:
    """`toolrun call` must start fast: on a warm catalog cache nothing heavy is imported.

    Not even Jinja: a template of plain `{{ name | quote }}` tags renders without it."""
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(
        "group: t\ntools:\n  - name: echo\n    exec: printf '%s' {{ msg | quote }}\n    params:\n"
        "      - name: msg\n        type: str\n",
        encoding="utf-8",
    )
    probe = (
        "import sys\n"
        "from toolrun.cli import app\n"
        "try:\n"
        f"    app(['call', '-c', {str(catalog)!r}, 't.echo', 'msg=hi'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "heavy = sorted(m for m in ('pydantic', 'starlette', 'uvicorn', 'mcp', 'rich', 'jinja2') if m in sys.modules)\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    first = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert first.stdout.startswith("hi")
    warm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert warm.stdout == "hiHEAVY=\n", warm.stdout


def test_the_console_script_keeps_exit_codes_and_flushes_output_when_it_skips_teardown(tmp_path: Path) -> None:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(
        "group: t\ntools:\n  - name: big\n    exec: yes x | head -c 300000; exit 3\n",
        encoding="utf-8",
    )
    toolrun = Path(sys.executable).parent / "toolrun"
    done = subprocess.run(
        [str(toolrun), "call", "-c", str(catalog), "t.big"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3
    assert done.stdout == "x\n" * 150000
    missing = subprocess.run([str(toolrun), "call", "-c", str(catalog), "t.nope"], capture_output=True, text=True)
    assert missing.returncode == 2
    assert "no tool 't.nope'" in missing.stderr
