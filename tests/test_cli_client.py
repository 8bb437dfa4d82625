"""One client interface under every `toolrun` command: the same command gives the same output, byte for byte, on
the local catalog and on a real `toolrun serve` (`--url`), and no command picks an implementation itself.

The remote side uses an admin's key whose user is the local operator (this machine's user name), so both
sides see every tool and act as the same person.
"""

from __future__ import annotations

import ast
import getpass
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.catalogs import write_catalog
from support.http import JSON
from support.keys import create_key
from support.servers import ToolrunServer, toolrun_cli

CLI = Path(__file__).resolve().parent.parent / "src" / "toolrun" / "cli"

CATALOG = """\
group: demo
tools:
  - name: echo
    description: "Print **text**, some times."
    exec: printf '%s' {{ text | quote }}
    allow_warnings: [unused-param]
    params:
      - {name: text, type: str, description: What to print, example: hi}
      - {name: times, type: int, default: 1, min: 1, max: 9}
  - name: fail
    groups: [ops]
    exec: "echo out; echo err >&2; exit 7"
  - name: add
    description: Add two numbers.
    fn: client_fns:add
    params:
      - {name: a, type: int}
      - {name: b, type: int}
  - name: wipe
    description: Wipe a target.
    exec: echo wiped {{ target | quote }}
    params:
      - {name: target, type: str}
    approval: required
    approvers: [oncall]
    approval_timeout: 600
"""


class Sides:
    """The same command, run locally (`-c CATALOG`) and on the server (`TOOLRUN_URL`, the operator's key)."""

    def __init__(self, server: ToolrunServer, operator_key: str) -> None:
        self.server = server
        self.local_env = {k: v for k, v in server.env.items() if k not in ("TOOLRUN_URL", "TOOLRUN_API_KEY")}
        self.remote_env = {**self.local_env, "TOOLRUN_URL": server.url, "TOOLRUN_API_KEY": operator_key}

    def local(self, *args: str) -> subprocess.CompletedProcess[str]:
        words = list(args)
        at = words.index("--") if "--" in words else len(words)
        return toolrun_cli(*words[:at], "-c", str(self.server.catalog), *words[at:], env=self.local_env)

    def remote(self, *args: str) -> subprocess.CompletedProcess[str]:
        return toolrun_cli(*args, env=self.remote_env)

    def both(self, *args: str) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
        return _seen(self.local(*args)), _seen(self.remote(*args))


def _seen(done: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    """Exit code, stdout, stderr; a call's duration (`"seconds": ...`) differs between any two calls."""
    return done.returncode, re.sub(r'"seconds": [0-9.e-]+', '"seconds": 0', done.stdout), done.stderr


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sides]:
    tmp = tmp_path_factory.mktemp("client")
    catalog = write_catalog(tmp, CATALOG)
    (tmp / "client_fns.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    with ToolrunServer(tmp / "server", catalog) as server:
        server.start()
        yield Sides(server, create_key(server.env, getpass.getuser(), "admin"))


@pytest.mark.parametrize(
    "args",
    [
        ("list",),
        ("list", "--json"),
        ("list", "--group", "ops"),
        ("list", "--group", "nothing"),
        ("describe", "demo.echo"),
        ("describe", "demo.add", "--json"),
        ("search", "print", "text"),
        ("search", "wipe", "--json"),
        ("search", "demo", "--limit", "2", "--offset", "1"),
        ("search", "zzzqqq"),
        ("call", "demo.echo", "text=hi there"),
        ("call", "demo.echo", "text=hi", "--json"),
        ("call", "demo.fail"),
        ("call", "demo.fail", "--json"),
        ("call", "demo.add", "a=2", "b=3"),
        ("call", "demo.add", "a=2", "b=3", "--json"),
        ("call", "demo.echo", "times=x", "text=a"),
        ("call", "demo.echo", "--text", "a"),
        ("call", "demo.echo", "nope=1", "--json"),
    ],
    ids=" ".join,
)
def test_a_command_answers_the_same_on_the_local_catalog_and_on_the_server(sides: Sides, args: tuple[str, ...]) -> None:
    local, remote = sides.both(*args)
    assert remote == local, args
    assert local[1] or local[2], args  # the command said something: not two empty answers


def test_the_job_commands_answer_the_same_on_the_local_state_and_on_the_server(sides: Sides) -> None:
    import httpx

    alice = create_key(sides.server.env, "alice", "demo")

    def request_wipe(target: str) -> str:
        answer = httpx.post(
            sides.server.url + "/tools/demo.wipe",
            headers={**JSON, "X-API-Key": alice},
            content=json.dumps({"target": target}),
        )
        assert answer.status_code == 202, answer.text
        return str(answer.json()["job"])

    first, second = request_wipe("db1"), request_wipe("db2")
    # A job id may start with a dash: after `--` it is never read as an option.
    for args in (("jobs", "list"), ("jobs", "list", "--json"), ("jobs", "show", "--", first)):
        local, remote = sides.both(*args)
        assert remote == local, args
    listed = json.loads(sides.local("jobs", "list", "--json", "--status", "awaiting_approval").stdout)
    assert {first, second} <= {view["job"] for view in listed}
    # Denied here, and denied on the server: the same answer but for the job's id.
    denied_here = _seen(sides.local("jobs", "deny", "--reason", "not today", "--", first))
    denied_there = _seen(sides.remote("jobs", "deny", "--reason", "not today", "--", second))
    assert denied_here == (0, "", f"job {first} (demo.wipe): denied by {getpass.getuser()}: not today\n")
    assert denied_there == (0, "", denied_here[2].replace(first, second))


def test_a_local_call_never_loads_the_http_client_and_a_remote_one_never_loads_the_service(sides: Sides) -> None:
    """`toolrun call` starts fast both ways: each side imports only its own client."""
    heavy = (
        "toolrun.cli.client_remote",
        "urllib.request",
        "toolrun.service",
        "toolrun.cli.client_local",
        "starlette",
        "uvicorn",
    )

    def imported(env: dict[str, str], *args: str) -> str:
        probe = (
            "import sys\nfrom toolrun.cli import app\n"
            f"try:\n    app({list(args)!r})\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            f"print('LOADED=' + ','.join(m for m in {heavy!r} if m in sys.modules))\n"
        )
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
        assert "LOADED=" in done.stdout, done.stderr
        return done.stdout.rsplit("LOADED=", 1)[1].strip()

    catalog = str(sides.server.catalog)
    assert (
        imported(sides.local_env, "call", "-c", catalog, "demo.echo", "text=hi")
        == "toolrun.service,toolrun.cli.client_local"
    )
    url = sides.server.url
    assert (
        imported(sides.remote_env, "--url", url, "call", "demo.echo", "text=hi")
        == "toolrun.cli.client_remote,urllib.request"
    )


def _imports(path: Path) -> set[str]:
    """The names a module imports, as `module.name` (relative imports resolved inside toolrun)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = {0: "", 1: "toolrun.cli.", 2: "toolrun."}[node.level] + (node.module or "")
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def test_only_the_client_factory_picks_the_local_or_the_remote_client() -> None:
    picks = {"toolrun.cli.client_local.LocalClient", "toolrun.cli.client_remote.Remote"}
    choosers = {path.name for path in CLI.glob("*.py") if _imports(path) & picks}
    assert choosers == {"client.py"}
    commands = {"browse.py", "call.py", "jobcmds.py", "accesscmds.py"}
    assert all("toolrun.cli.client.open_client" in _imports(CLI / name) for name in commands)
