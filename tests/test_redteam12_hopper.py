"""Red team 12 on the timeout's kill (procguard.kill_call, lead's ed7f602): a process that hops from pid to pid.

A tool's process that leaves the group (`setsid`) and then, over and over, forks and lets its parent exit, keeps the
call's token in its environment but is never the same process for long: each scan of /proc (a few milliseconds)
lists /proc once and reads each pid of that list: the hop listed is gone before its turn comes, and the hops born
since are not in the list; three rounds end, and it runs on after the call's timeout, until the server stops (its
watchdog's scans race it the same way). Stopping each carrier the moment a scan finds it does not help: it is not
found at all (tried: 5 runs out of 5 survived). Each hop that exits is reaped by pid 1, which on this machine takes
seconds: thousands of zombies then slow every scan (50 ms each), which widens the race. Without a sandbox it
survives (a sandboxed call's PID namespace dies with its first process: it does not). No small fix holds it: a
cgroup per call, or the server as the child subreaper of what its tools start, would. NOT FIXED: this test says so
(xfail; not strict: on a quiet host a scan may catch a hop by luck).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from toolrun.exec import executor

HOPPER = """
import os, sys, time
mark, last, born = sys.argv[1], 0.0, time.monotonic()
with open(mark + ".pgid", "w") as f:  # every hop keeps the group: the test's clean-up kills it in one signal
    f.write(str(os.getpgid(0)))
while time.monotonic() - born < 10:  # and it ends by itself, should the clean-up miss it
    if os.fork() > 0:
        os._exit(0)
    time.sleep(0.003)  # each hop lives 3 ms (about 500 pids in this test, each reaped by pid 1 at its exit)
    if time.time() - last > 0.05:
        last = time.time()
        with open(mark, "a"):
            pass
        os.utime(mark)
"""


def _stop_hoppers(script: Path, mark: Path) -> None:
    """Kill what is left of the hopper: its process group, which every hop keeps (a scan of /proc, as the kill's,
    may miss every hop; the group's id from its own file does not)."""
    with contextlib.suppress(OSError, ValueError):
        pgid = int(Path(f"{mark}.pgid").read_text())
        os.killpg(pgid, signal.SIGSTOP)
        os.killpg(pgid, signal.SIGKILL)
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < 0.3:
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and str(script).encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    pgid = os.getpgid(int(entry))
                    os.killpg(pgid, signal.SIGSTOP)
                    os.killpg(pgid, signal.SIGKILL)
                    quiet_since = time.monotonic()
            except OSError:
                continue


@pytest.mark.xfail(strict=False, reason="a hopping process outruns the /proc scans: needs a cgroup or a subreaper")
def test_a_process_that_hops_from_pid_to_pid_dies_at_the_timeout(tmp_path: Path) -> None:
    script, mark = tmp_path / "hopper.py", tmp_path / "alive"
    script.write_text(HOPPER)
    command = f"setsid {sys.executable} {script} {mark} </dev/null >/dev/null 2>&1 & sleep 30"
    try:
        result = asyncio.run(executor.run(command, timeout=0.5, env={"PATH": "/usr/bin:/bin"}))
        assert result.timed_out
        answered = time.time()
        time.sleep(0.5)
        assert mark.exists()
        assert mark.stat().st_mtime < answered + 0.1, "the hopper ran on after its call's timeout"
    finally:
        _stop_hoppers(script, mark)
