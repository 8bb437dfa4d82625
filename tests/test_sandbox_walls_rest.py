"""The sandbox's walls that issue 34 found weak (besides the mounts): with a real bubblewrap, as a hostile tool
would try them, with the server as root and as an unprivileged user.

- `network: none` refuses every socket family but AF_UNIX, AF_INET and AF_INET6 (the last two reach only the
  sandbox's own loopback): AF_VSOCK and netlink (host uevents) are no longer open.
- What a user sees: a failed sandboxed call names its profile and what that withholds (CLI stderr, the
  `Toolrun-Sandbox` header); a profile that cannot work here is logged at `serve`, fails /readyz, and its
  calls answer 503 with a short message (the paths go to the server's log only).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.servers import wait_until
from support.sysusers import SERVER_USERS, UserServer, as_user, server_user, shared_dir

JSON = {"content-type": "application/json"}
EXECUTE_GONE = {"name": "execute", "arguments": {"key": "t.gone", "arguments": {}}}


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


# -- what a user sees -------------------------------------------------------------------------------------

SEEN = """\
group: t
tools:
  - name: escape
    public: true
    exec: echo planted > /usr/planted
    sandbox: {writable: [out]}
  - name: fails
    public: true
    exec: exit 3
  - name: gone
    public: true
    exec: echo hi
    sandbox: {writable: [gone]}
  - name: fine
    public: true
    exec: echo fine
    sandbox: true
"""


@pytest.mark.parametrize("kind", SERVER_USERS)
def test_a_failed_sandboxed_call_names_its_profile_on_the_cli_and_in_a_header(kind: str) -> None:
    user = server_user(kind)
    with shared_dir(user) as base:
        (base / "out").mkdir()
        catalog = write_catalog(base, SEEN.replace("  - name: gone", "  - name: gone-later"))
        catalog.chmod(0o644)
        out = os.path.realpath(base / "out")
        failed = cli(user, base, "call", "-c", str(catalog), "t.escape")
        plain = cli(user, base, "call", "-c", str(catalog), "t.fails")
        with UserServer(base, catalog, user).start() as server, httpx.Client(base_url=server.url, timeout=30) as c:
            answer = c.post("/tools/t.escape", headers=JSON)
            fine = c.post("/tools/t.fine", headers=JSON)
            unboxed = c.post("/tools/t.fails", headers=JSON)
    assert failed.returncode != 0 and "Read-only file system" in failed.stderr, failed.stderr
    assert failed.stderr.rstrip().splitlines()[-1] == (
        "note: t.escape ran in sandbox profile 'default', which withholds the network (no connection leaves the "
        f"sandbox); every file outside /usr, /etc, {out} and a private /tmp; writing outside /tmp and {out}; the "
        "host's processes; toolrun's own files"
    )
    assert plain.returncode == 3 and "sandbox" not in plain.stderr  # no sandbox, no note
    assert answer.status_code == 200 and answer.headers["x-toolrun-exit-code"] != "0"
    header = answer.headers["toolrun-sandbox"]
    assert header.startswith("profile=default; withholds=the network") and f"writing outside /tmp and {out}" in header
    assert fine.status_code == 200 and "toolrun-sandbox" not in fine.headers  # only a failed call carries it
    assert "toolrun-sandbox" not in unboxed.headers


@pytest.mark.parametrize("kind", SERVER_USERS)
def test_a_profile_that_cannot_work_here_is_logged_fails_readyz_and_answers_503_without_paths(kind: str) -> None:
    user = server_user(kind)
    with shared_dir(user) as base:
        (base / "out").mkdir()
        catalog = write_catalog(base, SEEN)
        catalog.chmod(0o644)
        gone = os.path.realpath(base / "gone")
        with UserServer(base, catalog, user).start() as server, httpx.Client(base_url=server.url, timeout=30) as c:
            ready = c.get("/readyz")
            text = c.post("/tools/t.gone", headers=JSON)
            as_json = c.post("/tools/t.gone", headers={**JSON, "accept": "application/json"})
            fine = c.post("/tools/t.fine", headers=JSON)
            mcp = c.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": EXECUTE_GONE},
                headers={**JSON, "accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"},
            )
            wait_until(lambda: "readiness check sandbox failed" in server.log(), 10, "the readiness line")
            server.stop()
            log = server.log()
    assert f"1 sandboxed tool(s) cannot run on this host: t.gone: its sandbox binds {gone}, which does not exist" in log
    assert ready.status_code == 503 and ready.json() == {"status": "degraded"}
    assert text.status_code == 503, text.text
    assert text.text == (
        "SandboxUnavailable: tool t.gone runs in a sandbox that cannot be set up on this server; it was not run "
        "(the server's log says why)"
    )
    assert "retry-after" not in text.headers
    assert as_json.status_code == 503 and as_json.json()["type"] == "SandboxUnavailable"
    for body in (text.text, as_json.text, mcp.text):
        assert str(base) not in body and "/gone" not in body and "home" not in body, body
    assert "cannot be set up on this server" in mcp.text, mcp.text
    assert f"binds {gone}, which does not exist" in log.split("listening on", 1)[1]  # each call's reason: logged
    assert fine.status_code == 200 and fine.text == "fine\n"  # the other sandboxed tools still run


# -- found attacking the above as a hostile tool (or caller) would ----------------------------------------------


def test_a_job_of_a_sandboxed_tool_that_cannot_run_tells_its_reader_no_paths(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An async call's job record carried SandboxUnavailable's whole text (the server's paths) to GET /jobs/{id}."""
    from starlette.testclient import TestClient

    from toolrun.server.run import build_app
    from toolrun.settings import Settings

    catalog = write_catalog(
        tmp_path,
        "group: t\ntools:\n  - name: gone\n    public: true\n    async: true\n    exec: echo hi\n"
        "    sandbox: {writable: [gone]}\n",
    )
    from support.keys import mint_key

    key = mint_key(tmp_path / "home", "ann", ["users"])
    settings = Settings.load(environ={"TOOLRUN_HOME": str(tmp_path / "home")})
    headers = {**JSON, "x-api-key": key}
    with caplog.at_level("WARNING"), TestClient(build_app(settings, [str(catalog)]), base_url="http://127.0.0.1") as c:
        c.headers.update({"x-api-key": key})
        started = c.post("/tools/t.gone", content=b"{}", headers=headers)
        assert started.status_code == 202, started.text
        job = started.json()["job"]
        seen = wait_until(lambda: (r := c.get(f"/jobs/{job}")).json()["status"] == "failed" and r, 30, "the job")
    body = seen.text
    assert "cannot be set up on this server" in body, body
    assert str(tmp_path) not in body and "/gone" not in body, body
    assert f"binds {tmp_path}/gone, which does not exist" in caplog.text  # the operator still learns why


_HIGH_BITS = """\
import ctypes, errno, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 41, "aarch64": 198}[platform.machine()]
for name, family in (("vsock", 40), ("netlink", 16)):
    fd = libc.syscall(ctypes.c_long(nr), ctypes.c_long((1 << 32) | family), ctypes.c_long(1), ctypes.c_long(0))
    print(name, "created" if fd >= 0 else errno.errorcode.get(ctypes.get_errno()))
"""


def test_a_socket_family_with_high_bits_set_is_still_refused() -> None:
    """The kernel reads the family as a 32-bit int: the filter checks those bits, whatever the upper half says."""
    python = "/usr/bin/python3"
    if not os.path.exists(python):
        pytest.skip("no /usr/bin/python3 to make the system call with")
    with shared_dir(None) as base:  # a root server's sandboxed tools run as nobody: a folder nobody can read
        (base / "high.py").write_text(_HIGH_BITS)
        catalog = write_catalog(
            base,
            f"group: t\ntools:\n  - name: plain\n    exec: {python} high.py\n    cwd: .\n"
            f"  - name: none\n    exec: {python} high.py\n    cwd: .\n    sandbox: {{network: none}}\n",
        )
        plain = cli(None, base, "call", "-c", str(catalog), "t.plain")
        boxed = cli(None, base, "call", "-c", str(catalog), "t.none")
    assert "vsock created" in plain.stdout, plain.stdout + plain.stderr  # the kernel truncates: a real vsock
    assert "vsock EAFNOSUPPORT" in boxed.stdout and "netlink EAFNOSUPPORT" in boxed.stdout, boxed.stdout + boxed.stderr


def test_the_sandbox_header_cannot_be_split_by_a_path() -> None:
    from toolrun.exec.sandboxview import header_value
    from toolrun.models import Sandbox

    value = header_value(Sandbox(profile="p", network="none", writable=("/srv/a\r\nSet-Cookie: x=1", "/srv/é")))
    assert b"\r" not in value and b"\n" not in value and value.isascii()
    assert b"/srv/a%0D%0ASet-Cookie: x%3D1" in value and b"/srv/%C3%A9" in value
