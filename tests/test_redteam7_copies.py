"""Red team 7 on the copies of folders that hold toolrun's files (issue 34): what a copy grants a `user:`.

A copy (sandboxpaths._View) is a tmpfs of the call's user whose mode is what the host folder grants that user. The
mode was reckoned with every group of the tool's `user:`, its supplementary groups included, while the sandbox runs
that user with its uid and primary group only (`--clear-groups`, test_sandbox_groups.py). A folder of root's, mode
0751, group-listable by a supplementary group of the tool's user, is not listable by the tool on the host: its copy
was 0555, and the jail listed every name in it.

Only a root server runs a tool as a `user:`; a server that is not root runs its tools as its own user and keeps its
groups (docs/security.md), so the copy's mode is reckoned from those, as before.
"""

from __future__ import annotations

import os
from pathlib import Path

from support import jails
from support.binaries import require_binary
from support.jails import Jail, need_root, said
from test_sandbox_groups import USER, _user_with_a_supplementary_group

base = jails.base


def test_a_copy_grants_a_user_tool_nothing_through_its_cleared_supplementary_groups(base: Path) -> None:
    """On the code before the fix the jail listed `unlisted-name-7` (the copy was 0555: the group's bits)."""
    require_binary("bwrap")
    need_root()
    _, _, secret_gid = _user_with_a_supplementary_group()
    folder = base / "app"
    folder.mkdir()
    (folder / "unlisted-name-7").write_text("a name the tool's user cannot list\n")
    jail = Jail(base, "root")
    jail.catalog = folder / "tools.yaml"  # the catalog in the bound folder: the jail shows a copy of it
    jail.catalog.write_text(
        "group: t\ntools:\n  - name: peek\n    public: true\n"
        f"    exec: ls {folder}; echo listed=$?\n    user: {USER}\n    timeout: 30\n"
        f"    sandbox: {{readable: [{folder}]}}\n"
    )
    os.chown(folder, 0, secret_gid)
    folder.chmod(0o751)  # root's; its group may list it; others may only pass through
    done = jail.call("t.peek")
    assert "unlisted-name-7" not in said(done), said(done)
    assert "listed=0" not in done.stdout, said(done)
