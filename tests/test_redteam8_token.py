"""Red team 8 on the call's token (issue 34): `TOOLRUN_CALL=<server token>.<n>` is how the server finds a tool's
processes that left its process group (at a timeout, procguard.kill_call; when the server dies, its watchdog).

Red team 7's sandbox.jail_env carries each of a tool's names outside its shell and gives them back in its first line,
and the token was added after that, outside only. A tool whose environment names `TOOLRUN_CALL` itself (its `env:`,
or a passthrough such as `TOOLRUN_*`) then had its own value given back over the call's token: without a jail
prepared ahead, and for every `user:` tool without a sandbox. A `user:` tool's process that left its group (setsid,
its parent gone) carried no token, so nothing found it at the timeout: it outlived the call, as long as it liked.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from support import jails
from support.jails import Jail, need_root, said
from support.procs import pids_matching

server, base, jail = jails.server, jails.base, jails.jail

PLAIN = {"TOOLRUN_SPEEDUPS": "jail_pool"}  # no jail prepared ahead: the jail is started with the call


def test_a_user_tool_naming_the_token_still_has_its_escaped_processes_killed(base: Path) -> None:
    """On the code before the fix the `sleep` that left the call's group was still running after the call's timeout:
    it carried the catalog's TOOLRUN_CALL, not the call's token."""
    need_root()
    seconds = 3000 + os.getpid() % 1000  # a unique sleep: its command line is the marker
    jail = Jail(base, "root")
    jail.write(
        "group: t\ntools:\n  - name: escape\n    public: true\n"
        f"    exec: '(setsid sleep {seconds} &); sleep 30'\n"
        "    env: {TOOLRUN_CALL: mine}\n    user: toolrun-test\n    timeout: 2\n"
    )
    try:
        done = jail.call("t.escape")
        assert "timeout" in said(done), said(done)
        time.sleep(0.5)
        left = pids_matching(f"sleep {seconds}", "sleep")
        assert left == [], "a process that left the call's group outlived its timeout"
    finally:
        for pid in pids_matching(f"sleep {seconds}", "sleep"):
            os.kill(pid, signal.SIGKILL)


def test_a_tool_naming_the_token_sees_the_calls_token_in_every_path(jail: Jail) -> None:
    """The tool's shell carries the call's token whatever the tool's environment names, with and without a jail
    prepared ahead. On the code before the fix, without one, the tool saw its own value (`mine`)."""
    jail.write(
        "group: t\ntools:\n  - name: boxed\n    public: true\n    exec: echo call=$TOOLRUN_CALL\n"
        "    env: {TOOLRUN_CALL: mine}\n    sandbox: {}\n"
        "  - name: limited\n    public: true\n    exec: echo call=$TOOLRUN_CALL\n"
        "    env: {TOOLRUN_CALL: mine}\n    limits: {cpu: 30}\n    sandbox: {}\n"
    )
    for speedups in ({}, PLAIN):
        for key in ("t.boxed", "t.limited"):
            done = jails.toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), key, env=speedups)
            assert done.returncode == 0, said(done)
            assert done.stdout.startswith("call=") and "mine" not in done.stdout, (key, speedups, said(done))
            assert done.stdout.strip().count(".") == 1, done.stdout  # <server token>.<n>
