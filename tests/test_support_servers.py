"""The test helpers' processes (support/servers.py): a server a test starts dies with the test process, however
that process ends. A pytest killed mid-test (a timeout's SIGKILL, an xdist worker that crashed) never runs its
fixtures' teardown; before the parent-death signal its servers lived on (one for 81 minutes) and held ports, CPU
and files for the runs after it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.binaries import require_binary
from support.procs import gone, proc_stat
from support.servers import wait_until

TESTS = Path(__file__).parent

# A test process in small: start a server (from the main thread, or from a thread that ends at once), print the
# pid of the server, then wait to be killed.
STARTER = """
import sys, threading, time
from pathlib import Path
from support.catalogs import write_catalog
from support.servers import ToolrunServer

work = Path(sys.argv[1])
server = ToolrunServer(work / "srv", write_catalog(work, "group: t\\ntools:\\n  - {name: echo, exec: printf hi}\\n"))
if sys.argv[2] == "thread":
    starter = threading.Thread(target=server.start)
    starter.start()
    starter.join()
else:
    server.start()
print(server.pid, flush=True)
time.sleep(300)
"""


def tree(pid: int) -> list[int]:
    """`pid` and its children (a server's supervisor and its workers)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *map(int, children)]


@pytest.mark.parametrize("started_from", ["main", "thread"])
def test_a_server_started_by_a_test_process_dies_when_that_process_is_killed(started_from: str, tmp_path: Path) -> None:
    require_binary("setpriv")
    argv = [sys.executable, "-c", STARTER, str(tmp_path), started_from]
    with subprocess.Popen(argv, cwd=TESTS, stdout=subprocess.PIPE, text=True, start_new_session=True) as starter:
        pids: list[int] = []
        try:
            assert starter.stdout is not None
            server = int(starter.stdout.readline().split()[0])
            pids = wait_until(lambda: len(tree(server)) > 1 and tree(server), 30, "the server's workers")
            # a thread that started the server and ended does not take the server with it
            assert starter.poll() is None and all(proc_stat(pid) for pid in pids)
            os.kill(starter.pid, signal.SIGKILL)  # no teardown, no atexit: what a timeout does to a pytest
            starter.wait(10)
            assert gone(pids, 10) == [], "the server outlived the test process that started it"
        finally:
            if starter.poll() is None:
                os.killpg(starter.pid, signal.SIGKILL)
            for pid in pids:  # what a failure left: not for the tests after this one
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
