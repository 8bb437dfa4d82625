"""A fifth red team on the sandbox (issue 34's "fresh red team"), after the jail pool and the third red team's
fixes: attacks a hostile tool or caller tried, each driven as a tool would, with a real bwrap, through the real
`toolrun` command, once with the server as root and once as a user that is not root. Each test failed on the code
before its fix.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

import httpx
import pytest

from support import jails
from support.binaries import require_binary
from support.catalogs import write_catalog
from support.jails import Jail, need_root, said, toolrun_as
from support.procs import pids_matching
from support.servers import wait_until
from toolrun.speedups import ENV

# The sandbox fixtures (support/jails.py): `server` ("root", "user"), `base` (a folder every user may enter), `jail`.
server, base, jail = jails.server, jails.base, jails.jail


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
    pool it reads a running call's environment and traces it. validate-catalog said nothing; it warned, and now
    refuses it (test_sandbox_own_user.py)."""
    require_binary("bwrap")
    need_root()
    jail = Jail(base, "root")
    jail.write(
        "group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    sandbox: true\n"
        "  - name: forks\n    exec: echo many\n    user: nobody\n"
        "  - name: own\n    exec: echo mine\n    user: daemon\n"
    )
    done = jail.validate()
    assert done.returncode != 0, said(done)
    assert "t.forks: it runs as nobody without a sandbox, the user sandboxed tool t.boxed runs as" in said(done)
    assert "t.own: it runs as" not in said(done), said(done)


def test_a_covered_file_replaced_after_a_jail_was_prepared_stays_covered(server: str, base: Path) -> None:
    """A catalog file in a bound folder is covered in the jail by a mount over its name. Replacing the file on the
    host the usual way (an editor, `sed -i`, config management: write a new file, rename it over the old one) takes
    that mount away in every jail that was made before (the kernel detaches a mount whose place was renamed over in
    another mount namespace), and the jail pool's key named the covers by path only: the next call took a jail
    prepared before the edit and read the new catalog file, other tools' `env:` secrets included. The pool's key now
    holds each covered file's device and inode: a replaced file gets a jail of its own, covered again."""
    from test_sandbox_pool import _serve_as

    marker = f"coverjail-{uuid.uuid4().hex[:12]}"
    folder = base / marker
    folder.mkdir()
    os.chmod(folder, 0o755)
    text = (
        "group: t\ntools:\n  - name: peek\n    public: true\n    exec: cat {folder}/tools.yaml\n"
        "    sandbox: {{readable: [{folder}]}}\n  - name: other\n    exec: echo hi\n    env: {{TOKEN: {token}}}\n"
    )
    catalog = write_catalog(folder, text.format(folder=folder, token="old-token"))
    os.chmod(catalog, 0o644)
    srv = _serve_as(server, base / "srv", catalog)
    try:
        srv.ready()
        with httpx.Client(timeout=10) as client:
            for _ in range(3):
                first = client.post(f"{srv.url}/tools/t.peek", json={})
                assert "old-token" not in first.text, first.text
            wait_until(lambda: len(pids_matching(marker)) >= 4, 10, "jails prepared ahead")  # bwrap, waiter: 2 each
            fresh = folder / "tools.yaml.new"
            fresh.write_text(text.format(folder=folder, token="new-secret-token"))
            os.chmod(fresh, 0o644)
            os.replace(fresh, catalog)
            after = client.post(f"{srv.url}/tools/t.peek", json={})
        assert "new-secret-token" not in after.text, f"a jail prepared before the edit showed it: {after.text}"
    finally:
        srv.stop()
        for pid in pids_matching(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("speedups", ["off", "posix_spawn"])
def test_a_sandbox_with_bound_paths_works_with_the_speed_tricks_off(jail: Jail, speedups: str) -> None:
    """Found by the fifth red team: with `TOOLRUN_SPEEDUPS=off` (or `posix_spawn` off) every sandbox with a bound
    path was refused ("no posix_spawn with closefrom"), though the speedups promise the same answers either way.
    Handing bwrap its bound paths by descriptor needs glibc's posix_spawn with closefrom whatever the switch says:
    the switch only chooses how plain tools start."""
    out = jail.writable("out")
    jail.write(
        f"group: t\ntools:\n  - name: keep\n    exec: echo kept > {out}/note && cat {out}/note\n"
        f"    sandbox: {{writable: [{out}]}}\n"
    )
    done = toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), "t.keep", env={ENV: speedups})
    assert done.returncode == 0, said(done)
    assert done.stdout.strip() == "kept", said(done)
    assert (out / "note").read_text() == "kept\n"
