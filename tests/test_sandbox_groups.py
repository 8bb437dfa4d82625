"""A sandboxed tool's `user:` brings its uid and primary gid into the sandbox, not its supplementary groups.

setpriv `--init-groups` gave a sandboxed tool every group of its user: a user in group `shadow` read /etc/shadow
inside the sandbox (bound read-only by its profile), though the sandbox is meant to hold the tool to what it shows
to an unprivileged user. A sandbox now clears the supplementary groups; a tool without a sandbox keeps them.
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
from pathlib import Path

import httpx

from support import jails
from support.binaries import require_binary
from support.jails import Jail, need_root, said
from support.servers import ToolrunServer

base = jails.base  # the fixture (support/jails.py): a folder every user may enter

USER, GROUP = "toolrun-suppl", "toolrun-suppl-secret"


def _user_with_a_supplementary_group() -> tuple[int, int, int]:
    """`toolrun-suppl` (primary group its own) in the supplementary group `toolrun-suppl-secret`, created when
    missing: (uid, primary gid, the supplementary group's gid)."""
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        subprocess.run([require_binary("groupadd"), "--system", GROUP], check=False, capture_output=True)
    try:
        pwd.getpwnam(USER)
    except KeyError:
        useradd = require_binary("useradd")
        argv = [useradd, "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin"]
        subprocess.run([*argv, "--groups", GROUP, USER], check=False, capture_output=True)
    entry, group = pwd.getpwnam(USER), grp.getgrnam(GROUP)
    assert USER in group.gr_mem, "the test user is not in its supplementary group"
    return entry.pw_uid, entry.pw_gid, group.gr_gid


def _setup(base: Path, sandboxed: bool = True) -> tuple[Jail, int]:
    require_binary("bwrap")
    need_root()
    _, gid, secret_gid = _user_with_a_supplementary_group()
    secret = base / "ro" / "secret"
    secret.parent.mkdir()
    secret.write_text("group members only\n")
    os.chown(secret, 0, secret_gid)
    os.chmod(secret, 0o640)
    jail = Jail(base, "root")
    body = f"exec: cat {secret}; echo groups=$(id -G)\n    user: {USER}\n    timeout: 30\n"
    # Two catalogs: a tool without a sandbox may not share a sandboxed tool's user (test_sandbox_own_user.py).
    box = f"    sandbox: {{readable: [{secret.parent}]}}\n" if sandboxed else ""
    jail.write(f"group: t\ntools:\n  - name: tool\n    public: true\n    {body}{box}")
    return jail, gid


def test_a_sandboxed_tool_has_its_users_primary_group_only(base: Path) -> None:
    jail, gid = _setup(base)
    called = jail.call("t.tool")
    assert "group members only" not in called.stdout, said(called)
    assert "Permission denied" in called.stderr, said(called)
    assert f"groups={gid}\n" in called.stdout, said(called)


def test_a_tool_without_a_sandbox_keeps_its_users_groups(base: Path) -> None:
    jail, _ = _setup(base, sandboxed=False)
    called = jail.call("t.tool")
    assert called.stdout.startswith("group members only\n"), said(called)


def test_a_jail_of_the_pool_has_the_primary_group_only(base: Path) -> None:
    """A served tool called again takes a jail started ahead (the jail pool): the same rule holds there."""
    jail, gid = _setup(base)
    with (
        ToolrunServer(base / "home", jail.catalog).start() as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        for _ in range(3):
            answer = client.post("/tools/t.tool", json={})
            assert answer.status_code == 200, answer.text
            assert "group members only" not in answer.text and f"groups={gid}" in answer.text, answer.text
