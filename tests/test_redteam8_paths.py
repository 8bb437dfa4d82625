"""Red team 8 on a profile's paths under /dev (issue 34): the jail's /dev is its own (five nodes and a few links).

`writable: [/dev/shm]` was accepted at load and every call failed with bwrap's own "Can't bind mount
/oldroot/dev/shm on /newroot/dev/shm: ... No such file or directory"; `readable: [/dev/null]` was accepted too, and
bound the host's node read-only over the jail's (a bind without devices): a call whose jail was prepared ahead failed
with "/bin/sh: 1: eval: cannot open /dev/null: Permission denied". A path in /dev is now refused at load, naming the
tool and the path, and a call is refused with the same reason, never bwrap's.
"""

from __future__ import annotations

import os

import pytest

from support import jails
from support.jails import Jail, said

server, base, jail = jails.server, jails.base, jails.jail

PLAIN = {"TOOLRUN_SPEEDUPS": "jail_pool"}  # no jail prepared ahead: the jail is started with the call


@pytest.mark.parametrize(
    "profile", ["writable: [/dev/shm]", "readable: [/dev/null]", "readable: [/dev/./shm/]", "writable: [/dev/pts]"]
)
def test_a_path_in_dev_is_refused_at_load_naming_the_tool_and_the_path(jail: Jail, profile: str) -> None:
    """On the code before the fix validate-catalog said `valid` for each of these profiles."""
    jail.write(f"group: t\ntools:\n  - name: shm\n    exec: echo hi\n    sandbox: {{{profile}}}\n")
    done = jail.validate()
    assert done.returncode != 0, said(done)
    path = os.path.normpath(profile.split("[")[1].rstrip("]"))  # as the catalog shows it
    assert f"t.shm: its sandbox may not bind {path}: it is in /dev" in said(done), said(done)
    for speedups in ({}, PLAIN):
        called = jails.toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), "t.shm", env=speedups)
        assert called.returncode != 0, said(called)
        assert "it is in /dev" in said(called) and "bwrap:" not in said(called), said(called)
        assert "Traceback" not in said(called), said(called)


def test_a_cwd_in_dev_is_refused_at_load(jail: Jail) -> None:
    jail.write("group: t\ntools:\n  - name: here\n    exec: pwd\n    cwd: /dev/shm\n    sandbox: true\n")
    done = jail.validate()
    assert done.returncode != 0, said(done)
    assert "t.here: its sandbox may not bind its working directory /dev/shm: it is in /dev" in said(done), said(done)
