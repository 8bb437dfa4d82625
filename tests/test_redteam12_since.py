"""Red team 12 on the timeout's kill (lead's ed7f602): the scan reads the environment only of processes started at or
after `since` (procguard.ticks(), taken when the call's token was made). Attempts to make a tool's process look older
than that, which held:

- a process started in the same clock tick as `since`: `ticks()` is one tick less than now, and the kernel's start
  time (CLOCK_BOOTTIME at the fork, truncated to ticks) is never below it (1,500 forks here: 1 or 2 ticks above);
- a process in a time namespace of its own with its boot time set back (by half the host's uptime): /proc shows a
  start time through the reader's time namespace (the server's), never through the process's own.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from support.binaries import require_binary
from toolrun.exec import executor, procguard


def test_a_process_forked_in_the_tick_of_since_is_never_older_than_it() -> None:
    for _ in range(200):
        since = procguard.ticks()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os._exit(0)
        try:
            assert int(procguard._started(pid)) >= since  # a zombie's stat still says
        finally:
            os.waitpid(pid, 0)


def test_a_tool_process_in_a_time_namespace_set_back_dies_at_the_timeout(tmp_path: Path) -> None:
    """It leaves the group and its parent exits: found by the call's token only, its start time read by the server."""
    unshare = require_binary("unshare")
    mark = tmp_path / "pid"
    ns = tmp_path / "ns"
    inner = f"readlink /proc/self/ns/time > {ns}; echo $$ > {mark}; exec sleep 30"
    back = int(time.clock_gettime(time.CLOCK_BOOTTIME) / 2)  # no further than the boot: the kernel refuses that
    escaper = f"{unshare} --user --map-root-user --time --boottime -{back} setsid sh -c '{inner}'"
    command = f"( {escaper} </dev/null >/dev/null 2>&1 & ); sleep 30"
    result = asyncio.run(executor.run(command, timeout=1.0, env={"PATH": "/usr/bin:/bin"}))
    assert result.timed_out
    pid = int(mark.read_text())
    assert ns.read_text().strip() != os.readlink("/proc/self/ns/time")  # it ran in a time namespace of its own
    for _ in range(100):
        if not os.path.exists(f"/proc/{pid}") or Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z":
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        raise AssertionError("the process in its own time namespace outlived its call's timeout")
