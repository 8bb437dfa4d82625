"""The sandbox's walls that issue 34 found weak (besides the mounts): with a real bubblewrap, as a hostile tool
would try them, with the server as root and as an unprivileged user.

- `network: none` refuses every socket family but AF_UNIX, AF_INET and AF_INET6 (the last two reach only the
  sandbox's own loopback): AF_VSOCK and netlink (host uevents) are no longer open.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.sysusers import SERVER_USERS, as_user, server_user, shared_dir


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_binary("bwrap")


def cli(user: tuple[int, int] | None, base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`toolrun <args>` as `user`, with its own TOOLRUN_HOME under `base`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    env["TOOLRUN_HOME"] = str(base / "home")
    argv = [*as_user(user), sys.executable, "-m", "toolrun", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False, cwd=base)


# -- socket families under network: none --------------------------------------------------------------------

# Creates each socket, connects nowhere: what the kernel (and the filter) answers.
_SOCKETS = """\
import errno, socket
for name, family, kind, proto in (
    ("vsock", 40, socket.SOCK_STREAM, 0),
    ("netlink-uevent", 16, socket.SOCK_DGRAM, 15),
    ("netlink-route", 16, socket.SOCK_RAW, 0),
    ("packet", 17, socket.SOCK_DGRAM, 0),
    ("unix", 1, socket.SOCK_STREAM, 0),
    ("inet", 2, socket.SOCK_STREAM, 0),
    ("inet6", 10, socket.SOCK_STREAM, 0),
):
    try:
        socket.socket(family, kind, proto).close()
        print(name, "created")
    except OSError as exc:
        print(name, errno.errorcode.get(exc.errno, exc.errno))
try:
    [s.close() for s in socket.socketpair(40, socket.SOCK_STREAM)]
    print("vsock-pair created")
except OSError as exc:
    print("vsock-pair", errno.errorcode.get(exc.errno, exc.errno))
[s.close() for s in socket.socketpair(socket.AF_UNIX)]
print("unix-pair created")
"""


def _answers(text: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


@pytest.mark.parametrize("kind", SERVER_USERS)
def test_network_none_refuses_vsock_netlink_and_packet_sockets_and_keeps_unix(kind: str) -> None:
    python = "/usr/bin/python3"
    if not os.path.exists(python):
        pytest.skip("no /usr/bin/python3 to create the sockets with")
    user = server_user(kind)
    with shared_dir(user) as base:
        (base / "sockets.py").write_text(_SOCKETS)
        tools = "\n".join(
            f"  - name: {name}\n    exec: {python} sockets.py\n    cwd: .\n{box}"
            for name, box in (
                ("plain", ""),
                ("none", "    sandbox: {network: none}\n"),
                ("host", "    sandbox: {network: host}\n"),
            )
        )
        catalog = write_catalog(base, f"group: t\ntools:\n{tools}\n")
        catalog.chmod(0o644)
        answers = {}
        for name in ("plain", "none", "host"):
            done = cli(user, base, "call", "-c", str(catalog), f"t.{name}")
            assert done.returncode == 0, (name, done.stdout, done.stderr)
            answers[name] = _answers(done.stdout)
    plain, none, host = answers["plain"], answers["none"], answers["host"]
    # Without a sandbox the kernel lets this user make them: the sandbox is what refuses.
    assert plain["vsock"] == "created" and plain["netlink-uevent"] == "created", plain
    for family in ("vsock", "netlink-uevent", "netlink-route", "packet", "vsock-pair"):
        assert none[family] == "EAFNOSUPPORT", (family, none)
    for family in ("unix", "inet", "inet6", "unix-pair"):
        assert none[family] == "created", (family, none)
    assert host["vsock"] == "created" and host["netlink-route"] == "created", host  # network: host keeps them
