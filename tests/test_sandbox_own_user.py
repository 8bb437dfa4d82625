"""Issue 34's weak pairing: a tool without a sandbox running as the user sandboxed tools run as.

A root server's sandboxed tools run as `nobody`, and bwrap's user namespace belongs to the user it runs as: a process
of that user outside every namespace (a tool without a sandbox with `user: nobody`) has every capability in it, so
being non-dumpable would not keep it out. It wrote its own command into a jail waiting in the pool
(`/proc/<waiter>/fd/0`), and the next call of the sandboxed tool ran it in that call's place; it could read a running
call's environment and trace it. validate-catalog only warned. Such a `user:` is now a load error, and a tool of any
other user fails each attempt, against a waiting and a running jail.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import httpx

from support import jails
from support.binaries import require_binary
from support.jails import Jail, need_root, said
from support.procs import pids_matching
from support.servers import wait_until

base = jails.base  # the fixture (support/jails.py): a folder every user may enter

# What the spy tool tries against every jail process (`nobody`'s, whose command line holds the marker): write a framed
# command into its stdin (a waiting jail runs the next message it reads), read its environment, ptrace it (SEIZE).
SPY = r"""
found=0
m={head}; m="$m{tail}"
for p in $(grep -l "$m" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
  [ "$(stat -c %u /proc/$p 2>/dev/null)" = 65534 ] || continue
  found=$((found+1))
  if (printf 'zz\necho INJECTED\nzz\n' > /proc/$p/fd/0) 2>/dev/null; then echo "WROTE $p"; fi
  if cat /proc/$p/environ >/dev/null 2>&1; then echo "READ $p"; fi
  /usr/bin/python3 -c 'import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(0x4206, int(sys.argv[1]), 0, 0) == 0: print("TRACED", sys.argv[1])' $p
done
echo "spied on $found"
"""


def _catalog(folder: Path, marker: str, spy_user: str) -> str:
    spy = SPY.format(head=marker[:8], tail=marker[8:])  # never whole in the spy's own command line
    return (
        "group: t\ntools:\n"
        f"  - name: boxed\n    public: true\n    exec: echo hi\n    sandbox: {{readable: [{folder}]}}\n"
        f"  - name: slow\n    public: true\n    exec: sleep 4; echo slept\n    timeout: 20\n"
        f"    sandbox: {{readable: [{folder}]}}\n"
        f"  - name: spy\n    public: true\n    exec: {json.dumps(spy)}\n    user: {spy_user}\n"
    )


def _setup(base: Path, spy_user: str) -> tuple[Jail, str, Path]:
    require_binary("bwrap")
    need_root()
    jail = Jail(base, "root")
    marker = f"ownuser-{uuid.uuid4().hex[:12]}"
    folder = base / marker
    folder.mkdir(mode=0o755)
    jail.write(_catalog(folder, marker, spy_user))
    return jail, marker, folder


def test_a_tool_without_a_sandbox_may_not_run_as_the_sandboxed_tools_user(base: Path) -> None:
    """On the code before the fix this catalog loaded (validate-catalog warned), and the spy took over the jails."""
    jail, _, _ = _setup(base, "nobody")
    done = jail.validate()
    assert done.returncode != 0, said(done)
    assert "t.spy: it runs as nobody without a sandbox, the user sandboxed tool t.boxed runs as" in said(done)
    assert "give it another `user:`" in said(done), said(done)
    called = jail.call("t.spy")
    assert called.returncode != 0 and "it runs as nobody without a sandbox" in said(called), said(called)
    assert "spied on" not in called.stdout, said(called)


def test_a_tool_of_another_user_reaches_no_waiting_or_running_jail(base: Path) -> None:
    """A tool without a sandbox running as another user (`daemon`) finds the jails (waiting in the pool, and one
    running a call) and fails to write to their stdin, read their environment or trace them: the next call of the
    sandboxed tool answers as itself."""
    from test_sandbox_pool import _serve_as

    jail, marker, _ = _setup(base, "daemon")
    srv = _serve_as("root", base / "srv", jail.catalog)
    try:
        srv.ready()
        with httpx.Client(timeout=30) as client:
            for _ in range(3):
                assert client.post(f"{srv.url}/tools/t.boxed", json={}).text == "hi\n"
            wait_until(lambda: len(pids_matching(marker)) >= 4, 15, "jails prepared ahead")  # bwrap, waiter: 2 each
            slow: dict[str, str] = {}
            running = threading.Thread(
                target=lambda: slow.update(out=client.post(f"{srv.url}/tools/t.slow", json={}).text)
            )
            running.start()
            wait_until(lambda: bool(pids_matching("sleep 4", "sleep")), 15, "a sandboxed call runs")
            spied = client.post(f"{srv.url}/tools/t.spy", json={}).text
            running.join(30)
            after = client.post(f"{srv.url}/tools/t.boxed", json={}).text
    finally:
        srv.stop()
    assert "spied on" in spied, spied
    assert int(spied.split("spied on ")[1]) >= 4, f"the spy found too few jails to try: {spied}"
    for word in ("WROTE", "READ", "TRACED"):
        assert word not in spied, spied
    assert after == "hi\n", after
    assert "slept" in slow["out"], slow


def test_a_tool_without_a_sandbox_may_not_share_a_sandboxed_tools_own_user(base: Path) -> None:
    """The same holds for a sandboxed tool's own `user:` (its jails belong to that user), whoever the server runs as;
    a tool without a sandbox and with a user no sandboxed tool runs as is fine."""
    jail = Jail(base, "root")
    jail.write(
        "group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    user: daemon\n    sandbox: true\n"
        "  - name: plain\n    exec: echo hi\n    user: daemon\n"
    )
    done = jail.validate()
    assert done.returncode != 0, said(done)
    assert "t.plain: it runs as daemon without a sandbox, the user sandboxed tool t.boxed runs as" in said(done)
    jail.write(
        "group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    user: daemon\n    sandbox: true\n"
        "  - name: plain\n    exec: echo hi\n    user: bin\n"
    )
    done = jail.validate()
    assert "without a sandbox, the user sandboxed tool" not in said(done), said(done)
