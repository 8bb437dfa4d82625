"""Red team 6 on the own-user refusal (issue 34): a tool without a sandbox may not run as a sandboxed tool's user.

The refusal compared user names. Two names of one user id are one user to the kernel: a tool without a sandbox whose
`user:` is another name of `nobody`'s id (or of a sandboxed tool's own `user:`) loaded, and on the host it owned the
user namespace of every jail, as the refusal's own test shows for `nobody` itself (test_sandbox_own_user).
"""

from __future__ import annotations

import pwd
import subprocess
from pathlib import Path

from support import jails
from support.binaries import require_binary
from support.jails import Jail, need_root, said
from support.sysusers import unprivileged

base = jails.base

ALIAS = "toolrun-test-alias"  # another name of `toolrun-test`'s id (support/sysusers.py), made when missing


def _alias(of: str, name: str) -> str:
    """`name`, a user with `of`'s user and group id (useradd --non-unique), made when missing."""
    entry = pwd.getpwnam(of)
    try:
        found = pwd.getpwnam(name)
    except KeyError:
        useradd = require_binary("useradd")
        argv = [useradd, "--system", "--non-unique", "--uid", str(entry.pw_uid), "--gid", str(entry.pw_gid)]
        subprocess.run([*argv, "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=False)
        found = pwd.getpwnam(name)  # made here, or by a test running beside this one
    assert found.pw_uid == entry.pw_uid, f"{name} exists with another id: {found}"
    return name


def test_a_tool_without_a_sandbox_may_not_run_as_another_name_of_a_sandboxed_tools_user(base: Path) -> None:
    """On the code before the fix this catalog loaded with no word: the names differ, the user is one."""
    require_binary("bwrap")
    need_root()
    unprivileged()  # makes toolrun-test
    alias = _alias("toolrun-test", ALIAS)
    jail = Jail(base, "root")
    jail.write(
        "group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    user: toolrun-test\n    sandbox: true\n"
        f"  - name: plain\n    exec: id -u\n    user: {alias}\n"
    )
    done = jail.validate()
    assert done.returncode != 0, said(done)
    assert f"t.plain: it runs as {alias} without a sandbox, the user sandboxed tool t.boxed runs as" in said(done)
    called = jail.call("t.plain")
    assert called.returncode != 0, said(called)
    assert "without a sandbox, the user sandboxed tool t.boxed runs as" in said(called), said(called)


def test_a_tool_without_a_sandbox_may_not_run_as_another_name_of_nobody_beside_a_root_servers_jails(
    base: Path,
) -> None:
    """A root server's sandboxed tools run as `nobody`: a second name of its id is refused the same way."""
    require_binary("bwrap")
    need_root()
    alias = _alias("nobody", "toolrun-nobody-alias")
    jail = Jail(base, "root")
    jail.write(
        "group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    sandbox: true\n"
        f"  - name: plain\n    exec: id -u\n    user: {alias}\n"
    )
    done = jail.validate()
    assert done.returncode != 0, said(done)
    assert f"t.plain: it runs as {alias} without a sandbox, the user sandboxed tool t.boxed runs as" in said(done)
