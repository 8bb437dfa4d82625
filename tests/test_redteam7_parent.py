"""Red team 7 on the parent-death signal (issue 34): a server killed while a jail starts.

bwrap sets its parent-death signal itself (`--die-with-parent`), some time after toolrun spawned it (after prlimit,
unshare or setpriv, and bwrap's own start). A server killed in that window never signals the jail: the kernel sends
the signal when the parent dies, and the parent died before the signal was set. What stood between such a jail and
the tool's command was the check's channel: the jail's shell says `ok` on it before the command, to the server only.
With the server gone the write fails (EPIPE), but the shell is its PID namespace's first process (`--as-pid-1`), which
the kernel does not kill for SIGPIPE: it went on and ran the command, with no server, no timeout and no parent-death
signal (a `sleep` of the tool outlived its 2-second timeout and wrote after it).

The window is real and short (a few milliseconds, more under load); here bwrap is a wrapper on PATH that waits a
second before it execs the real one, so the server is killed inside it every time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx

from support import jails
from support.binaries import require_binary
from support.catalogs import write_catalog
from support.jails import Jail
from support.procs import pids_matching
from support.servers import clean_env, wait_until
from support.sysusers import as_user, unprivileged

server, base, jail = jails.server, jails.base, jails.jail


def test_a_jail_whose_server_died_before_its_parent_death_signal_runs_nothing(jail: Jail) -> None:
    """On the code before the fix `ran` was written 4 s after the server was killed (its timeout was 2 s)."""
    real = require_binary("bwrap")
    slow = jail.base / "bin"
    slow.mkdir(mode=0o755)
    (slow / "bwrap").write_text(f'#!/bin/sh\nsleep 1\nexec {real} "$@"\n')
    (slow / "bwrap").chmod(0o755)
    work = jail.writable("work")
    marker = f"rt7-orphan-{os.getpid()}"
    jail.write(
        "group: t\ntools:\n  - name: late\n    public: true\n"
        f"    exec: 'sleep 4; echo {marker} > {work}/ran'\n"
        f"    timeout: 2\n    sandbox: {{writable: [{work}]}}\n"
    )
    env = clean_env(jail.home) | {
        "HOME": str(jail.home),
        "PATH": f"{slow}:{os.environ['PATH']}",
        "TOOLRUN_SPEEDUPS": "jail_pool",  # the jail is started with the call, the command in its argv
    }
    argv = [sys.executable, "-m", "toolrun", "call", "-c", str(jail.catalog), "t.late"]
    if jail.server == "user" and os.geteuid() == 0:
        jail.home.mkdir(parents=True, exist_ok=True)
        os.chown(jail.home, *unprivileged())
        argv = [*as_user(unprivileged()), *argv]
    call = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: pids_matching(f"{slow}/bwrap"), 30, "the slow bwrap started")
    finally:
        call.send_signal(signal.SIGKILL)  # the server dies before bwrap set its parent-death signal
        call.wait()
    time.sleep(6)  # the tool's sleep and its write, had it run
    left = pids_matching(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not (work / "ran").exists(), "the tool ran after its server died"
    assert left == [], left


def test_a_served_jail_half_made_when_its_server_is_killed_is_not_left_behind(server: str, base: Path) -> None:
    """`toolrun serve`, its process group killed (SIGKILL) while bwrap starts a call's jail, before bwrap set its
    parent-death signal. bwrap then wrote its status to a server that was gone, died of SIGPIPE before it let its
    child go on, and the child (the jail's first process, in the middle of bwrap's set-up) waited for it forever,
    holding the jail's bound folders. On the code before the fix it was still there after the server's watchdog
    had done its work: jails prepared ahead were started with an empty environment, without the server's token."""
    real = require_binary("bwrap")
    from test_sandbox_pool import _serve_as

    marker = f"rt7-halfmade-{uuid.uuid4().hex[:12]}"
    slow = base / "bin"
    slow.mkdir(mode=0o755)
    (slow / "bwrap").write_text(f'#!/bin/sh\nsleep 1\nexec {real} "$@"\n')
    (slow / "bwrap").chmod(0o755)
    data = base / marker  # bound: every jail of the tool has it on its command line
    data.mkdir(mode=0o755)
    (base / "cat").mkdir()
    catalog = write_catalog(
        base / "cat",
        "group: t\ntools:\n  - name: boxed\n    public: true\n    exec: echo hi\n"
        f"    sandbox: {{readable: [{data}]}}\n",
    )
    srv = _serve_as(server, base / "srv", catalog, {"PATH": f"{slow}:{os.environ['PATH']}"})
    try:
        srv.ready()
        caller = threading.Thread(target=_call_quietly, args=(f"{srv.url}/tools/t.boxed",), daemon=True)
        caller.start()
        wait_until(lambda: pids_matching(f"{slow}/bwrap --"), 30, "the call's slow bwrap started")
        os.killpg(srv.pid, signal.SIGKILL)  # the serving processes; the watchdog (a session of its own) stays
        srv.wait(10)
        time.sleep(4)  # bwrap's second of delay, then whatever the watchdog does
        left = pids_matching(marker)
        assert left == [], [_argv(pid)[:60] for pid in left]
    finally:
        srv.stop()
        for pid in pids_matching(marker):
            os.kill(pid, signal.SIGKILL)


def _call_quietly(url: str) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(url, json={}, timeout=30)


def _argv(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "(gone)"


def test_what_the_start_probe_left_dies_with_a_killed_server(server: str, base: Path) -> None:
    """`toolrun serve` runs the default jail once at start (the probe), before it serves. A server killed in the
    middle of it left the probe's bwrap child waiting for its parent forever (seen on this machine: a bwrap of a
    killed test server, parent 1, blocked in its set-up for 15 minutes): the probe carried no token, so the server's
    watchdog never found it. Here the fake bwrap leaves a process of a session of its own, as such a child is; on the
    code before the fix it outlived the server."""
    real = require_binary("bwrap")
    from test_sandbox_pool import _serve_as

    marker = f"1000.{uuid.uuid4().int % 10**9:09d}"
    slow = base / "bin"
    slow.mkdir(mode=0o755)
    (slow / "bwrap").write_text(f'#!/bin/sh\nsetsid sleep {marker} </dev/null >/dev/null 2>&1 &\nexec {real} "$@"\n')
    (slow / "bwrap").chmod(0o755)
    (base / "cat").mkdir()
    catalog = write_catalog(
        base / "cat", "group: t\ntools:\n  - name: boxed\n    public: true\n    exec: echo hi\n    sandbox: {}\n"
    )
    srv = _serve_as(server, base / "srv", catalog, {"PATH": f"{slow}:{os.environ['PATH']}"})
    try:
        srv.ready()
        wait_until(lambda: pids_matching(f"sleep {marker}"), 10, "the probe's leftover")
        os.killpg(srv.pid, signal.SIGKILL)  # the serving processes; the watchdog (a session of its own) stays
        srv.wait(10)
        deadline = time.monotonic() + 5
        while pids_matching(f"sleep {marker}") and time.monotonic() < deadline:
            time.sleep(0.1)
        left = pids_matching(f"sleep {marker}")
        assert left == [], "a process the probe left outlived its killed server"
    finally:
        srv.stop()
        for pid in pids_matching(f"sleep {marker}"):
            os.kill(pid, signal.SIGKILL)
