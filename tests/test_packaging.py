"""Packaging: the entry points run, and a wheel carries the package."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from support.servers import free_port

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
    assert "toolrun = toolrun.launch:main" in scripts


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
        "assert 'toolrun.search.related' not in sys.modules  # search's related-words table is never read\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    first = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert first.stdout.startswith("hi")
    warm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    # Two speed tricks keep these out; with one turned off (TOOLRUN_SPEEDUPS) its plain path imports its module.
    from toolrun import speedups

    plain = [m for m, trick in (("jinja2", "plain_render"), ("pydantic", "cli_coercion")) if not speedups.on(trick)]
    assert warm.stdout == f"hiHEAVY={','.join(plain)}\n", warm.stdout


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


def _path_without_node() -> str:
    """$PATH minus every directory holding npm or node, plus the interpreter's own directory."""
    keep = [Path(sys.executable).parent.as_posix()]
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and not any((Path(entry) / tool).exists() for tool in ("npm", "node", "npx")):
            keep.append(entry)
    return os.pathsep.join(keep)


def _fresh_clone(into: Path) -> Path:
    """The files git tracks in this checkout (as they are in the work tree): what a fresh clone
    holds, without the git-ignored node_modules/, .venv/ or a locally built ui-dist/ that git does
    not know about."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        [git, "-C", str(ROOT), "ls-files", "-z"], capture_output=True, timeout=30, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


@pytest.mark.timeout(150)
def test_a_wheel_built_from_a_fresh_clone_without_node_serves_the_ui(tmp_path: Path) -> None:
    """A user who installs toolrun (`pip install .`, `pipx install git+...`) gets the browser UI with
    no Node.js anywhere: the build comes from the committed ui-dist/. Built with npm and node off
    PATH, installed into a directory of its own, then a real `toolrun serve --ui` from that install
    serves the page and every file it references."""
    clone = _fresh_clone(tmp_path / "clone")
    path = _path_without_node()
    assert shutil.which("npm", path=path) is None and shutil.which("node", path=path) is None
    env = {**os.environ, "PATH": path}
    env.pop("TOOLRUN_UI_DIST", None)
    args = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q"]
    if importlib.util.find_spec("hatchling") is not None:
        args.append("--no-build-isolation")
    done = subprocess.run(
        [*args, "-w", str(tmp_path / "dist"), str(clone)],
        capture_output=True, text=True, timeout=120, check=False, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (tmp_path / "dist").glob("toolrun-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "toolrun/ui-dist/index.html" in names, sorted(n for n in names if "ui" in n)
    assert not [n for n in names if n.startswith("ui-dist/")]

    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check", "-q",
         "--target", str(site), str(wheel)],
        capture_output=True, text=True, timeout=120, check=False, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

    port = free_port()
    home = tmp_path / "home"
    home.mkdir()
    probe = "import toolrun, sys; print(toolrun.__file__); sys.argv[0] = 'toolrun'; toolrun.cli.main()"
    serve_env = {k: v for k, v in env.items() if not k.startswith("SVC_")}
    serve_env.update({"PYTHONPATH": str(site), "TOOLRUN_HOME": str(home), "PYTHONUNBUFFERED": "1"})
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", "import toolrun.cli; " + probe, "serve", "--ui", "-c", str(ROOT / "examples"),
             "--port", str(port)],
            cwd=tmp_path, env=serve_env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        with urllib.request.urlopen(base + "/ui/", timeout=5) as response:
            index = response.read().decode()
        refs = re.findall(r'(?:src|href)="/ui/([^"]+)"', index)
        assert any(ref.endswith(".js") for ref in refs) and any(ref.endswith(".css") for ref in refs), index
        for ref in refs:
            with urllib.request.urlopen(f"{base}/ui/{ref}", timeout=5) as response:
                assert response.status == 200 and response.read(), ref
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    output = log.read_text()
    assert output.splitlines()[0] == str(site / "toolrun" / "__init__.py"), output
    assert f"serving the browser UI at /ui from {site / 'toolrun' / 'ui-dist'}" in output, output
