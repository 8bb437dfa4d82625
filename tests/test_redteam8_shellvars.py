"""Red team 8 on the names a tool's shell treats as its own (issue 34): with and without a sandbox, with and without
a jail prepared ahead, a tool's shell starts with the same variables.

- A jail prepared ahead: its waiter reads the call's message into `end`, `s` and `l`, and unset them before the
  tool's command; a tool whose `env:` names `s`, `l` or `end` lost them (`s=` where `sh -c` gives `s=one`).
- `sh -c` sets IFS, OPTIND, PPID and PWD itself as it starts, whatever its environment says. Since red team 7 the
  jail's first shell (and a root server's `user:` tool's) was given the tool's values for them after it started, as
  a waiter's export always did: the tool's command split its words on the tool's IFS (`IFS: x`) with a sandbox and
  on blanks without one.
"""

from __future__ import annotations

from pathlib import Path

from support import jails
from support.jails import Jail, need_root, said

server, base, jail = jails.server, jails.base, jails.jail

PLAIN = {"TOOLRUN_SPEEDUPS": "jail_pool"}  # no jail prepared ahead: the jail is started with the call
ENV = "{s: one, l: two, end: three, IFS: x, OPTIND: '7', PPID: '424242', PWD: /nowhere}"
SHOW = (
    '\'v="a b"; set -- $v; echo "words=$# optind=$OPTIND s=$s l=$l end=$end"; '
    '[ "$PWD" = "$(pwd)" ] && echo pwd=real; [ "$PPID" != 424242 ] && echo ppid=real\''
)
EXPECTED = "words=2 optind=1 s=one l=two end=three\npwd=real\nppid=real\n"


def test_a_sandboxed_tool_gets_the_shells_own_variables_and_its_own(jail: Jail) -> None:
    """On the code before the fix: `words=1 optind=7 s= l= end=` in a jail prepared ahead, `words=1 optind=7` and
    neither `real` without one (the tool's IFS, OPTIND, PWD and PPID over the shell's)."""
    jail.write(
        "group: t\ntools:\n"
        f"  - name: bare\n    public: true\n    exec: {SHOW}\n    env: {ENV}\n"
        f"  - name: boxed\n    public: true\n    exec: {SHOW}\n    env: {ENV}\n    sandbox: {{}}\n"
        f"  - name: limited\n    public: true\n    exec: {SHOW}\n    env: {ENV}\n    sandbox: {{}}\n"
        "    limits: {cpu: 30}\n"
    )
    bare = jail.call("t.bare")
    assert bare.stdout == EXPECTED, said(bare)  # sh -c, no sandbox: what every other path must give
    for speedups in ({}, PLAIN):
        for key in ("t.boxed", "t.limited"):
            done = jails.toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), key, env=speedups)
            assert done.stdout == EXPECTED, (key, speedups, said(done))


def test_a_user_tool_gets_the_shells_own_variables(base: Path) -> None:
    """On the code before the fix: `words=1 optind=7 ...`, and neither `real`."""
    need_root()
    jail = Jail(base, "root")
    jail.write(
        "group: t\ntools:\n"
        f"  - name: svc\n    public: true\n    exec: {SHOW}\n    env: {ENV}\n    user: toolrun-test\n"
        f"  - name: limited\n    public: true\n    exec: {SHOW}\n    env: {ENV}\n    user: toolrun-test\n"
        "    limits: {cpu: 30}\n"
    )
    for key in ("t.svc", "t.limited"):
        done = jail.call(key)
        assert done.stdout == EXPECTED, (key, said(done))
