"""Red team 8 on the copy's mode (issue 34): a folder that holds toolrun's files and lies in a bound path is shown as
a copy, whose mode grants the call's user what the host folder grants it, no more (red team 7: its uid and primary
group). The copy counted the mode's bits only: a folder with a POSIX access ACL that gives the call's user `--x`
(mode 0755, `user:nobody:--x`: nobody may enter it, not list it) was listed in a root server's jail, whose tools run
as nobody. The copy now grants what the ACL grants, as the kernel reckons it (the owner's entry, a named user's, the
groups', others'; within the mask).
"""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import pytest

from support import jails
from support.jails import NOBODY, Jail, need_root, said

base = jails.base

UNDEFINED = 0xFFFFFFFF


def _set_acl(path: Path, nobody: int, others: int) -> None:
    """An access ACL (setfacl's, written as the kernel keeps it): the owner rwx, `user:nobody:<nobody>`, the group
    and the mask r-x, others `<others>`. The machine has no setfacl: the extended attribute is the ACL itself."""
    entries = [(0x01, 7, UNDEFINED), (0x02, nobody, NOBODY[0]), (0x04, 5, UNDEFINED), (0x10, 5, UNDEFINED)]
    entries.append((0x20, others, UNDEFINED))
    raw = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)
    try:
        os.setxattr(path, "system.posix_acl_access", raw)
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP) or os.environ.get("CI") == "true":
            raise
        pytest.skip(f"{path}: this file system keeps no POSIX ACLs")


def _folder(base: Path) -> tuple[Jail, Path]:
    """A catalog in a folder of its own tool's readable path (so the folder is shown as a copy), beside `sub/`."""
    need_root()
    jail = Jail(base, "root")
    folder = base / "cat"
    (folder / "sub").mkdir(parents=True, mode=0o755)
    folder.chmod(0o755)
    (folder / "sub" / "note.txt").write_text("reachable\n")
    (folder / "sub" / "note.txt").chmod(0o644)
    jail.write(
        "group: t\ntools:\n  - name: look\n    public: true\n"
        f"    exec: 'ls {folder} || echo not-listed; cat {folder}/sub/note.txt'\n"
        f"    sandbox: {{readable: [{folder}]}}\n"
    )
    return jail, folder


def test_an_acl_that_lets_nobody_enter_but_not_list_is_kept_in_the_copy(base: Path) -> None:
    """On the code before the fix the jail listed the folder (`sub`, the catalog hidden), which nobody may not list
    on the host."""
    jail, folder = _folder(base)
    _set_acl(folder, nobody=1, others=5)
    for speedups in ({}, {"TOOLRUN_SPEEDUPS": "jail_pool"}):
        done = jails.toolrun_as("root", jail.home, "call", "-c", str(jail.catalog), "t.look", env=speedups)
        assert "sub" not in done.stdout.split(), said(done)
        assert "not-listed" in done.stdout and "reachable" in done.stdout, said(done)  # as on the host


def test_an_acl_that_lets_nobody_list_what_others_may_not_is_kept_in_the_copy(base: Path) -> None:
    """The ACL is followed both ways: a named entry that grants nobody more than others get lists the folder."""
    jail, folder = _folder(base)
    _set_acl(folder, nobody=5, others=1)
    done = jail.call("t.look")
    assert done.stdout.split()[0] == "sub" and "reachable" in done.stdout, said(done)
