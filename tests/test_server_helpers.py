"""What the server starts besides tools (issue 34, item 4): the semantic search's model process.

A tool that runs as the server's user must not read the server's secrets from a helper's
/proc/<pid>/environ (the helper gets a minimal environment and is non-dumpable), and no helper
outlives its server: not when the server's process group is stopped, not when a helper starts
while its starter exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid

import httpx
import pytest

from support.catalogs import write_catalog
from support.procs import gone, pids_matching, proc_stat
from support.servers import wait_until
from support.sysusers import SERVER_USERS, UserServer, as_user, server_user, shared_dir
from toolrun.search import semantic

SECRET = "helper-secret-" + uuid.uuid4().hex[:8]
JSON = {"content-type": "application/json"}

PEEK = """\
group: t
tools:
  - name: peek
    public: true
    description: Reads a process's environment, as a hostile tool of the server's user would.
    params:
      - {name: pid, type: int}
    exec: tr '\\0' '\\n' < /proc/{{ pid }}/environ
  - name: invoice
    public: true
    description: Create an invoice for a customer.
    exec: echo invoice
"""


@pytest.fixture(autouse=True)
def _extra() -> None:
    if not semantic.extra_installed():
        message = "toolrun[semantic] is not installed (the test extra installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def descendants(root: int) -> set[int]:
    """Every live process below `root`."""
    parents = {int(e): s[1] for e in os.listdir("/proc") if e.isdigit() and (s := proc_stat(int(e))) is not None}
    found: set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found.add(child)
                todo.append(child)
    return found


def helpers_below(pid: int) -> list[int]:
    return sorted(set(pids_matching("toolrun.search.embedder")) & descendants(pid))


@pytest.mark.parametrize("kind", SERVER_USERS)
def test_a_tool_cannot_read_the_helpers_environment_and_the_helper_dies_with_the_server_group(kind: str) -> None:
    user = server_user(kind)
    with shared_dir(user, "toolrun-helper-") as base:
        catalog = write_catalog(base, PEEK)
        catalog.chmod(0o644)
        settings = {"SVC_SEARCH_SEMANTIC": "true", "MY_SECRET": SECRET}
        server = UserServer(base, catalog, user, settings)
        helpers: list[int] = []
        try:
            server.start()
            try:
                helpers = wait_until(lambda: helpers_below(server.pid), 60, "the embedding helper")
            except TimeoutError:
                raise AssertionError(server.log()) from None
            helper = helpers[0]
            if user is not None:  # non-dumpable from its first statement on: its entries become root's
                wait_until(lambda: os.stat(f"/proc/{helper}/environ").st_uid == 0, 10, "a non-dumpable helper")
            with httpx.Client(base_url=server.url, timeout=30) as client:
                peeked = client.post("/tools/t.peek", json={"pid": helper}, headers=JSON).text
                own = client.post("/tools/t.peek", json={"pid": server.pid}, headers=JSON).text
            assert SECRET not in peeked, peeked  # a root tool reads it, and finds no secret there
            if user is not None:  # a tool of an unprivileged server: the entries are root's, like the server's
                assert "Permission denied" in peeked, peeked
                assert SECRET not in own and "Permission denied" in own, own
                assert os.stat(f"/proc/{helper}/environ").st_uid == 0
            with open(f"/proc/{helper}/environ", "rb") as fh:  # root reads it: what would a root tool see?
                environ = fh.read().decode(errors="replace").split("\0")
            assert not [e for e in environ if e.startswith(("MY_SECRET=", "SVC_"))], environ
            os.killpg(server.pid, signal.SIGTERM)  # the server's whole process group, as a service manager does
            server.wait(30)
            assert gone(helpers + helpers_below(server.pid), 15) == []
        finally:
            server.stop()
            for pid in helpers:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


RACE = """\
import os, sys
from toolrun.search.helper import Helper
proc = Helper(sys.argv[1], "").start()
print(proc.pid, flush=True)
os._exit(0)  # the starter is gone before the helper could tie its death signal to it
"""


def test_a_helper_whose_starter_exits_at_once_does_not_live_on() -> None:
    name = f"toolrun-race-{uuid.uuid4().hex[:12]}"
    done = subprocess.run([sys.executable, "-c", RACE, name], capture_output=True, text=True, timeout=60, check=True)
    pid = int(done.stdout.split()[0])
    try:
        assert gone([pid], 30) == [], "the helper outlived the process that started it"
    finally:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_the_helper_environment_is_the_minimum_and_names_its_starter() -> None:
    from toolrun.exec import procguard

    env = procguard.helper_env({"PATH": "/usr/bin", "MY_SECRET": "x", "SVC_METRICS_TOKEN": "y", "LANG": "C"})
    assert env == {"PATH": "/usr/bin", "LANG": "C", procguard.HELPER_PARENT: str(os.getpid())}


def test_the_watchdog_is_non_dumpable_so_a_tool_cannot_hold_its_pipe_open() -> None:
    """A tool of an unprivileged server that opened /proc/<watchdog>/fd/<pipe> for writing would keep the pipe
    alive past the server's death: the watchdog would never kill the server's tools. Its entries are root's now."""
    user = server_user("unprivileged")
    with shared_dir(user, "toolrun-watchdog-") as base:
        catalog = write_catalog(base, PEEK)
        catalog.chmod(0o644)
        with UserServer(base, catalog, user, {"SVC_WORKERS": "1"}).start() as server:
            found = wait_until(
                lambda: sorted(set(pids_matching("TOOLRUN_CALL=")) & descendants(server.pid)), 20, "the watchdog"
            )
            watchdog = found[0]
            assert os.stat(f"/proc/{watchdog}/fd").st_uid == 0, "the watchdog's descriptors are its user's"
            script = f"import os\nfor n in os.listdir('/proc/{watchdog}/fd'):\n    print(n)\n"
            peek = subprocess.run(
                [*as_user(user), sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=False
            )
        assert peek.returncode != 0 and "Permission denied" in peek.stderr, peek.stdout + peek.stderr
