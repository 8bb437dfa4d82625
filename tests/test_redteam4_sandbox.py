"""A fifth red team on the sandbox (issue 34's "fresh red team"), after the jail pool and the third red team's
fixes: attacks a hostile tool or caller tried, each driven as a tool would, with a real bwrap, through the real
`toolrun` command, once with the server as root and once as a user that is not root. Each test failed on the code
before its fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.binaries import require_binary
from support.jails import need_root, open_folder, toolrun_as
from test_sandbox_walls import Jail, said
from toolrun.speedups import ENV


@pytest.fixture(params=["root", "user"])
def server(request: pytest.FixtureRequest) -> str:
    require_binary("bwrap")
    if request.param == "root":
        need_root()
    return str(request.param)


@pytest.fixture
def base() -> Iterator[Path]:
    yield from open_folder()


@pytest.fixture
def jail(base: Path, server: str) -> Jail:
    return Jail(base, server)


@pytest.mark.parametrize("speedups", ["on", "jail_pool"], ids=["pool", "no-pool"])
@pytest.mark.parametrize("bound", [False, True], ids=["no-paths", "a-bound-path"])
def test_a_command_that_does_not_parse_is_the_tools_failure_not_a_sandbox_that_never_started(
    jail: Jail, bound: bool, speedups: str
) -> None:
    """The shell's check (and its `ok` on the check's channel) was on the same line as the tool's command, and the
    shell parses a whole line before it runs any of it: a command whose first line does not parse (`echo hi )`)
    kept the check from ever running, and the call was reported as a sandbox that could not be set up ("a bound
    path changed while the sandbox was set up ... it was not run", HTTP 503), the shell's own syntax error hidden.
    This was a call without the jail pool (`TOOLRUN_SPEEDUPS=jail_pool`), whose answers must be the pool's. The
    check now ends its line: the command is parsed after `ok` was said."""
    out = jail.writable("out")
    profile = f"{{writable: [{out}]}}" if bound else "true"
    command = "echo hi )"
    jail.write(f"group: t\ntools:\n  - name: broken\n    exec: {json.dumps(command)}\n    sandbox: {profile}\n")
    done = toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), "t.broken", env={ENV: speedups})
    assert done.returncode != 0, said(done)
    assert "it was not run" not in done.stderr and "bound path changed" not in done.stderr, said(done)
    assert "SandboxUnavailable" not in done.stderr and "Syntax error" in done.stderr, said(done)


def test_validate_catalog_warns_of_an_unsandboxed_tool_running_as_a_sandboxed_tools_user(base: Path) -> None:
    """Weak, not broken: a root server's sandboxed tools run as `nobody`, and a tool without a sandbox with `user:
    nobody` (which the docs once suggested for fork-heavy tools) is `nobody` on the host, outside every namespace: it
    wrote its own command into a jail waiting in the pool (`/proc/<waiter>/fd/0`), and the next call of the
    sandboxed tool ran it: it read that call's environment (an `API_TOKEN`) and answered in its place. Without the
    pool it reads a running call's environment and traces it. validate-catalog said nothing; it warns now."""
    require_binary("bwrap")
    need_root()
    jail = Jail(base, "root")
    jail.write(
        "group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    sandbox: true\n"
        "  - name: forks\n    exec: echo many\n    user: nobody\n"
        "  - name: own\n    exec: echo mine\n    user: daemon\n"
    )
    done = jail.validate()
    assert "t.forks: warning: it runs as nobody without a sandbox, the user sandboxed tool t.boxed runs as" in said(
        done
    )
    assert "t.own: warning: it runs as" not in said(done), said(done)
