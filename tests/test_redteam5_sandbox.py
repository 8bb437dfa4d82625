"""The sixth red team on the sandbox (issue 34's "fresh red team"): attacks a hostile tool tried, each driven as a
tool would, with a real bwrap, through the real `toolrun` command, with the server as root and as a user that is
not root. Each test failed on the code before its fix.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support import jails
from support.binaries import require_binary
from support.catalogs import write_catalog
from support.jails import Jail, said, toolrun_as
from support.servers import wait_until
from support.sysusers import SERVER_USERS, UserServer, server_user, shared_dir

# The sandbox fixtures (support/jails.py): `server` ("root", "user"), `base` (a folder every user may enter), `jail`.
server, base, jail = jails.server, jails.base, jails.jail

PYTHON = "/usr/bin/python3"
EXECUTE_LOST = {"name": "execute", "arguments": {"key": "t.lost", "arguments": {}}}


def _python_tool(name: str, script: str, profile: str, *args: str) -> str:
    """A catalog entry: `python3 -c SCRIPT ARGS` in the sandbox `profile`."""
    command = " ".join([PYTHON, "-c", shlex.quote(script), *args])
    return f"  - name: {name}\n    exec: {json.dumps(command)}\n    sandbox: {profile}\n"


@pytest.fixture
def redis_socket(base: Path) -> Iterator[Path]:
    """A redis-server listening on a Unix socket only, in `base`/app (a folder any user may enter), its socket open
    to every user (as a socket shared with the server's group would be to the server's user)."""
    binary = require_binary("redis-server")
    app = base / "app"
    app.mkdir()
    app.chmod(0o755)
    socket_path = app / "redis.sock"
    argv = [binary, "--port", "0", "--unixsocket", str(socket_path), "--unixsocketperm", "777", "--save", ""]
    argv += ["--appendonly", "no", "--dir", str(base), "--daemonize", "no", "--loglevel", "warning"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(socket_path.exists, 15, "redis-server's socket")
        yield socket_path
    finally:
        proc.terminate()
        proc.wait(10)


# Connects to the socket and asks Redis for its keys: toolrun's key store under `toolrun:key:...`.
_KEYS = """\
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print("refused", exc.errno)
    raise SystemExit(0)
s.sendall(b"*2\\r\\n$4\\r\\nKEYS\\r\\n$1\\r\\n*\\r\\n")
print("redis said", s.recv(65536))
"""


def test_toolruns_own_redis_socket_is_hidden_and_no_writable_path_may_hold_it(jail: Jail, redis_socket: Path) -> None:
    """With `redis_url = "unix:///.../redis.sock"`, toolrun's key store, jobs and state answer on that socket; a
    sandboxed tool whose `readable` folder held it connected and read (and could write) the key store: `KEYS *`
    listed `toolrun:key:...` and `toolrun:user:...`. With a `writable` folder it could also put a listener of its own
    in the socket's place, which the server's next connection would take for its key store. The socket is now
    toolrun's own like the key store's file: covered where a bound folder holds it, and a writable one fails the
    call."""
    app = redis_socket.parent
    env = {"SVC_REDIS_URL": f"unix://{redis_socket}"}
    jail.write(
        "group: t\ntools:\n"
        + _python_tool("peek", _KEYS, f"{{readable: [{app}]}}", str(redis_socket))
        + f"  - name: plant\n    exec: echo hi\n    sandbox: {{writable: [{app}]}}\n"
    )
    with socket.socket(socket.AF_UNIX) as client:  # a record of the key store's kind, as `toolrun keys` writes
        client.connect(str(redis_socket))
        client.sendall(b"SET toolrun:user:boss admin\r\n")
        assert client.recv(100) == b"+OK\r\n"
    peek = toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), "t.peek", env=env)
    assert peek.returncode == 0, said(peek)
    assert "redis said" not in peek.stdout and "toolrun:" not in peek.stdout, said(peek)
    assert peek.stdout.startswith("refused"), said(peek)
    plant = toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), "t.plant", env=env)
    assert plant.returncode != 0 and "hi" not in plant.stdout, said(plant)
    assert f"holds toolrun's own {redis_socket}" in plant.stderr, said(plant)


# Each call as a tool would make it; the numbers are the same on x86_64 and aarch64 (the unified table).
_CALLS = """\
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    got = libc.syscall(nr, *(ctypes.c_long(a) if isinstance(a, int) else a for a in args))
    return "EPERM" if got == -1 and ctypes.get_errno() == errno.EPERM else "not refused"
pidfd = libc.syscall(434, os.getpid(), 0)  # pidfd_open: of this very process
print("open_tree_attr", call(467, -100, b"/tmp", 0, None, 0))  # AT_FDCWD: an O_PATH of /tmp, a clone with flags
print("pidfd_getfd", call(438, pidfd, 1, 0))  # another process's descriptor, as ptrace would reach it
print("process_madvise", call(440, pidfd, None, 0, 20, 0))  # MADV_COLD on another process's memory
print("quotactl_fd", call(443, pidfd, 0, 0, None))
"""


def test_the_filter_refuses_the_rest_of_the_mount_api_and_of_reaching_into_other_processes(jail: Jail) -> None:
    """The filter refused the mount API by name (open_tree ... mount_setattr) but not `open_tree_attr` (Linux 6.15),
    which opens and clones mounts like open_tree; nor `pidfd_getfd` and `process_madvise`, which reach into another
    process as ptrace and process_vm_writev do; nor `quotactl_fd`, quotactl by descriptor. In a jail, with no
    capability, none gave more than the tool had (the kernel refused a clone), but the filter is the wall that
    holds when a kernel bug is found in one of them: each is refused now (EPERM), as its siblings are."""
    if not os.path.exists(PYTHON):
        pytest.skip("no /usr/bin/python3 to make the system calls with")
    jail.write("group: t\ntools:\n" + _python_tool("calls", _CALLS, "true"))
    done = jail.call("t.calls")
    assert done.returncode == 0, said(done)
    answers = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert answers == dict.fromkeys(("open_tree_attr", "pidfd_getfd", "process_madvise", "quotactl_fd"), "EPERM")


@pytest.mark.parametrize("kind", SERVER_USERS)
def test_a_sandboxed_tool_whose_cwd_is_gone_answers_503_without_the_path(kind: str) -> None:
    """A call that cannot get its sandbox answers 503 with a short message, the reason (the path that is missing)
    in the server's log only; but a sandboxed tool whose `cwd` did not exist answered any caller `500
    FileNotFoundError: [Errno 2] No such file or directory: '/srv/.../work'` (the server's path), over REST and
    MCP alike. It is now a SandboxUnavailable like a missing `writable` path: 503, the path logged."""
    require_binary("bwrap")
    user = server_user(kind)
    with shared_dir(user) as folder:
        gone = folder / "cwd-gone-x7"
        catalog = write_catalog(
            folder,
            f"group: t\ntools:\n  - name: lost\n    public: true\n    exec: echo hi\n    cwd: {gone}\n"
            "    sandbox: true\n",
        )
        catalog.chmod(0o644)
        with UserServer(folder, catalog, user).start() as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
            rest = client.post("/tools/t.lost", json={})
            mcp = client.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": EXECUTE_LOST},
                headers={"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"},
            )
            srv.stop()
            log = srv.log()
    assert rest.status_code == 503, rest.text
    assert rest.text.startswith("SandboxUnavailable: tool t.lost runs in a sandbox that cannot be set up"), rest.text
    for body in (rest.text, mcp.text):
        assert "cwd-gone-x7" not in body and "No such file" not in body, body
    assert "cannot be set up on this server" in mcp.text, mcp.text
    assert f"its working directory {gone} does not exist here" in log
