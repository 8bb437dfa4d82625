"""Red team 7 on `user:` without a sandbox: a root server drops a tool to its `user:` with setpriv (after prlimit).

Both ran as root with the tool's own environment, so the C library's loader of each acted on the tool's `LD_*`
variables. A tool `user: svc` whose environment names a library folder svc may write (`LD_LIBRARY_PATH`,
`LD_PRELOAD`: its own build output) wrote a library there in one call, and the next call ran it as root. The tool's
environment now reaches its shell only (sandbox.jail_env, as for a jail): setpriv and prlimit never see its names.
"""

from __future__ import annotations

import os
from pathlib import Path

from support import jails
from support.binaries import require_binary
from support.jails import Jail, need_root, said
from support.sysusers import unprivileged
from test_redteam7_env import LIBRARY

base = jails.base


def test_a_library_a_user_tool_wrote_never_runs_as_root(base: Path) -> None:
    """On the code before the fix the marker was written by uid=0: the library ran in setpriv (and prlimit)."""
    need_root()
    cc = require_binary("cc")
    user = unprivileged()
    work = base / "work"  # the tool's user's own folder
    work.mkdir()
    os.chown(work, *user)
    root_only = base / "root-only"  # only root may write here
    root_only.mkdir(mode=0o755)
    marker = root_only / "ran"
    (work / "lib.c").write_text(LIBRARY.replace("MARKER", str(marker)))
    jail = Jail(base, "root")
    jail.write(
        "group: t\ntools:\n"
        f"  - name: build\n    public: true\n    exec: {cc} -shared -fPIC -o {work}/lib.so {work}/lib.c && echo built\n"
        "    user: toolrun-test\n    timeout: 60\n"
        "  - name: run\n    public: true\n    exec: echo preload=$LD_PRELOAD\n"
        f"    env: {{LD_PRELOAD: {work}/lib.so}}\n    user: toolrun-test\n    limits: {{cpu: 30}}\n    timeout: 60\n"
    )
    built = jail.call("t.build")
    assert "built" in built.stdout, said(built)
    done = jail.call("t.run")
    assert done.returncode == 0, said(done)
    assert done.stdout == f"preload={work}/lib.so\n", said(done)  # the tool keeps its environment
    # the library ran in the tool's own processes (as toolrun-test, which may not write there), never as root
    assert not marker.exists(), marker.read_text()
