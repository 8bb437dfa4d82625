"""Red team 7 on the sandbox's environment (issue 34): the programs that start a jail run outside it.

Without a jail prepared ahead (`TOOLRUN_SPEEDUPS=jail_pool` or `off`, the plain path operators are told to use to
rule a trick out), a sandboxed call was spawned as `[prlimit] [setpriv] [unshare] bwrap ... sh -c CMD` with the
tool's own environment. prlimit, setpriv and unshare run as root under a root server, bwrap as the server's user,
all outside every namespace and before the seccomp filter; the C library's loader of each acted on the tool's
`LD_*` variables. A sandboxed tool with `env: {LD_PRELOAD: <its writable folder>/lib.so}` (meant for its own
programs in the jail) compiled a library there in one call, and the next call ran it as root on the host (as the
server's user under a server that is not root: the key store's owner).

The tool's environment now reaches the tool's shell in the jail only: outside it, each of its names is carried
under another name, and the jail's first shell gives the tool its own names back.
"""

from __future__ import annotations

import os
from pathlib import Path

from support import jails
from support.binaries import require_binary
from support.jails import Jail, said, toolrun_as
from support.sysusers import unprivileged

server, base, jail = jails.server, jails.base, jails.jail

PLAIN = {"TOOLRUN_SPEEDUPS": "jail_pool"}  # no jail prepared ahead: the jail is started with the call

LIBRARY = r"""#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void ran(void) {
  FILE *f = fopen("MARKER", "a");
  if (f) { fprintf(f, "uid=%d pid=%d\n", (int)getuid(), (int)getpid()); fclose(f); }
}
"""


def _host_folder(jail: Jail, name: str) -> Path:
    """A host folder the server's user may write, which the jail does not show."""
    folder = jail.base / name
    folder.mkdir()
    if jail.server == "user":
        os.chown(folder, *unprivileged())
    return folder


def test_a_library_the_tool_wrote_never_loads_outside_its_jail(jail: Jail) -> None:
    """On the code before the fix the marker was written on the host by uid 0 (root server) or the server user's
    uid: the library ran in unshare/bwrap, outside the jail."""
    cc = require_binary("cc")
    work = jail.writable("work")
    marker = _host_folder(jail, "outside") / "ran"
    (work / "lib.c").write_text(LIBRARY.replace("MARKER", str(marker)))
    jail.write(
        "group: t\ntools:\n"
        "  - name: build\n    public: true\n"
        f"    exec: {cc} -shared -fPIC -o {work}/lib.so {work}/lib.c && echo built\n"
        f"    timeout: 60\n    sandbox: {{writable: [{work}]}}\n"
        "  - name: run\n    public: true\n    exec: echo $LD_PRELOAD; echo ran\n"
        f"    env: {{LD_PRELOAD: {work}/lib.so}}\n"
        f"    timeout: 60\n    sandbox: {{writable: [{work}]}}\n"
    )
    built = toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), "t.build", env=PLAIN)
    assert "built" in built.stdout, said(built)
    done = toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), "t.run", env=PLAIN)
    assert done.returncode == 0, said(done)
    assert f"{work}/lib.so\nran\n" == done.stdout, said(done)  # the tool keeps its environment, in the jail
    assert not marker.exists(), marker.read_text()


def test_the_loaders_variables_of_a_tool_act_in_its_jail_only(jail: Jail) -> None:
    """No compiler needed: LD_DEBUG_OUTPUT makes the loader of each program that honours the tool's environment
    write a file; before the fix prlimit, unshare and bwrap wrote theirs on the host, beside the catalog."""
    require_binary("bwrap")
    folder = _host_folder(jail, "debug")
    out = folder / "loader"
    jail.write(
        "group: t\ntools:\n  - name: run\n    public: true\n    exec: echo ran\n"
        f"    env: {{LD_DEBUG: libs, LD_DEBUG_OUTPUT: {out}}}\n"
        "    limits: {processes: 50}\n    timeout: 60\n    sandbox: true\n"
    )
    done = toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), "t.run", env=PLAIN)
    assert done.returncode == 0, said(done)
    assert "ran\n" in done.stdout, said(done)
    written = sorted(p.name for p in folder.iterdir())
    assert written == [], written


SHOW_LIMIT = 'echo limit=$(grep processes /proc/self/limits | tr -s " " | cut -d" " -f3) preload=$LD_PRELOAD'
HOOK = r"""#include <sys/types.h>
#include <sys/resource.h>
/* prlimit(1) sets the tool's limits with prlimit(2): this one sets nothing and says it did */
int prlimit(pid_t pid, int resource, const struct rlimit *new, struct rlimit *old) { return 0; }
int prlimit64(pid_t pid, int resource, const void *new, void *old) { return 0; }
"""


def test_a_library_the_tool_wrote_never_loads_into_the_program_that_sets_its_limits(jail: Jail) -> None:
    """In a jail (prepared for the call, as `toolrun call` and the pool do), prlimit sets the call's limits before the
    tool's shell starts. On the code before the fix it was started with the tool's environment: the tool's
    LD_PRELOAD, pointing at a library the tool wrote in its writable path, made prlimit set no limit (the tool's
    process limit was the host's, not 20)."""
    cc = require_binary("cc")
    work = jail.writable("work")
    (work / "hook.c").write_text(HOOK)
    jail.write(
        "group: t\ntools:\n"
        "  - name: build\n    public: true\n"
        f"    exec: {cc} -shared -fPIC -o {work}/hook.so {work}/hook.c && echo built\n"
        f"    timeout: 60\n    sandbox: {{writable: [{work}]}}\n"
        f"  - name: run\n    public: true\n    exec: {SHOW_LIMIT}\n"
        f"    env: {{LD_PRELOAD: {work}/hook.so}}\n    limits: {{processes: 20}}\n"
        f"    timeout: 60\n    sandbox: {{writable: [{work}]}}\n"
    )
    built = jail.call("t.build")
    assert "built" in built.stdout, said(built)
    for speedups in ({}, PLAIN):
        done = toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), "t.run", env=speedups)
        assert done.stdout == f"limit=20 preload={work}/hook.so\n", (speedups, said(done))


def test_the_tool_sees_the_same_environment_with_and_without_a_jail_prepared_ahead(jail: Jail) -> None:
    """The names carried outside the jail are given back whole (a value with spaces and `$`, a name that is itself
    the carried form of another), with or without limits, and none of the carried names is left."""
    require_binary("bwrap")
    env = "{A: 'x y $z', TOOLRUN_JAILED_A: kept, LD_LIBRARY_PATH: /nowhere}"
    jail.write(
        "group: t\ntools:\n"
        f"  - name: plain\n    public: true\n    exec: env | sort\n    env: {env}\n    sandbox: true\n"
        f"  - name: limited\n    public: true\n    exec: env | sort\n    env: {env}\n"
        "    limits: {processes: 50}\n    sandbox: true\n"
    )
    seen = set()
    for key in ("t.plain", "t.limited"):
        for speedups in ({}, PLAIN):
            done = toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), key, env=speedups)
            assert done.returncode == 0, said(done)
            lines = [line for line in done.stdout.splitlines() if not line.startswith("TOOLRUN_CALL=")]
            assert "A=x y $z" in lines and "TOOLRUN_JAILED_A=kept" in lines, lines
            assert "LD_LIBRARY_PATH=/nowhere" in lines, lines
            assert [line for line in lines if line.startswith("TOOLRUN_JAILED_")] == ["TOOLRUN_JAILED_A=kept"], lines
            seen.add(tuple(lines))
    assert len(seen) == 1, seen  # the same environment, every way the jail was started
