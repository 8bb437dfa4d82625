"""Sandboxed exec tools, with a real bubblewrap: what a sandboxed tool cannot do, and that it fails closed.

Each guarantee is shown against the same command run without a sandbox, so a test that passes here
would fail on code that did not sandbox.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.jails import jail_writable, open_folder
from toolrun.access import Access
from toolrun.catalog import load
from toolrun.errors import SandboxUnavailable
from toolrun.exec import sandbox, seccomp
from toolrun.models import CallResult, Identity
from toolrun.service import ToolService
from toolrun.settings import Settings

OPERATOR = Identity(username="op", groups=frozenset({"admin"}), anonymous=False)


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_binary("bwrap")


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A folder a root server's sandboxed tools (which run as `nobody`) can reach; pytest's are 0700."""
    yield from open_folder()


def service(directory: Path, text: str) -> ToolService:
    return ToolService(load([write_catalog(directory, text)]))


def call(svc: ToolService, key: str, **args: Any) -> CallResult:
    return asyncio.run(svc.call(OPERATOR, key, args))


def run_both(tmp_path: Path, command: str, box: str = "true", timeout: float = 10) -> tuple[CallResult, CallResult]:
    """The same command, plain and sandboxed."""
    text = f"""\
group: t
tools:
  - name: plain
    exec: {command!r}
    timeout: {timeout}
  - name: boxed
    exec: {command!r}
    timeout: {timeout}
    sandbox: {box}
"""
    svc = service(tmp_path, text)
    return call(svc, "t.plain"), call(svc, "t.boxed")


def output(result: CallResult) -> str:
    assert result.exec is not None
    return result.exec.stdout + result.exec.stderr


# -- the filesystem ----------------------------------------------------------------------------------------


def test_writing_outside_writable_fails_and_a_writable_path_works(tmp_path: Path) -> None:
    out = jail_writable(tmp_path / "out")
    elsewhere = jail_writable(tmp_path / "elsewhere")
    writes = f"echo a > {elsewhere}/file; echo b > {out}/file"
    plain = call(service(tmp_path, f"group: t\ntools:\n  - name: plain\n    exec: {writes!r}\n"), "t.plain")
    assert plain.ok and (elsewhere / "file").exists()  # the same writes work without a sandbox
    os.remove(elsewhere / "file")
    os.remove(out / "file")

    command = f"{writes}; echo c > /etc/toolrun-probe; echo d > /x; echo done"
    (tmp_path / "cat").mkdir()
    catalog = f"group: t\ntools:\n  - name: boxed\n    exec: {command!r}\n    sandbox: {{writable: [{out}]}}\n"
    boxed = call(service(tmp_path / "cat", catalog), "t.boxed")
    assert boxed.ok, output(boxed)
    assert (out / "file").read_text() == "b\n"  # the writable path works, from inside and outside
    assert not (elsewhere / "file").exists()  # not bound at all: no such directory in the sandbox
    assert not Path("/etc/toolrun-probe").exists()
    assert output(boxed).count("Read-only file system") == 2  # /etc, and the sandbox's own root


def test_tmp_is_private_and_writable(tmp_path: Path) -> None:
    name = f"/tmp/toolrun-scratch-{secrets.token_hex(4)}"
    text = f"group: t\ntools:\n  - name: boxed\n    exec: echo x > {name} && cat {name}\n    sandbox: true\n"
    boxed = call(service(tmp_path, text), "t.boxed")
    assert boxed.ok, output(boxed)
    assert boxed.value == "x\n"
    assert not Path(name).exists()  # the sandbox's /tmp is its own, and gone after the call


def test_toolruns_key_store_and_state_file_cannot_be_read(tmp_path: Path, _isolated_home: Path) -> None:
    from toolrun.state.sqlite import SQLiteKeyStore, SQLiteState

    data = _isolated_home / "data"
    data.mkdir(parents=True)
    Access(SQLiteKeyStore(data / "toolrun.db")).create_key("alice", ["ops"])
    SQLiteState(data / "state.db")  # creates the state file with its tables
    assert (data / "toolrun.db").stat().st_size > 0 and (data / "state.db").is_file()
    command = f"wc -c < {data}/toolrun.db; wc -c < {data}/state.db; ls {data}"
    # Even a profile that makes the folder holding toolrun's home readable does not show it.
    plain, boxed = run_both(tmp_path, command, box=f"{{readable: [{tmp_path}]}}")
    assert plain.ok and "toolrun.db" in output(plain)

    assert not boxed.ok
    assert boxed.exec is not None
    assert "toolrun.db" not in boxed.exec.stdout and "state.db" not in boxed.exec.stdout
    assert "Permission denied" in boxed.exec.stderr or "No such file" in boxed.exec.stderr
    # And without `readable`, nothing of it exists in the sandbox at all.
    _, default = run_both(tmp_path, f"ls {_isolated_home}")
    assert not default.ok and "No such file" in output(default)


def test_the_tools_cwd_is_read_only(tmp_path: Path) -> None:
    (tmp_path / "input.txt").write_text("data\n")
    text = """\
group: t
tools:
  - name: boxed
    exec: cat input.txt; pwd; touch new.txt
    cwd: .
    sandbox: true
"""
    result = call(service(tmp_path, text), "t.boxed")
    assert result.exec is not None
    assert result.exec.stdout == f"data\n{tmp_path}\n"
    assert "Read-only file system" in result.exec.stderr
    assert not (tmp_path / "new.txt").exists()


# -- the network -------------------------------------------------------------------------------------------


def test_a_loopback_connection_fails_with_network_none_and_works_with_host(tmp_path: Path) -> None:
    bash = require_binary("bash")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        command = f"{bash} -c 'echo > /dev/tcp/127.0.0.1/{port}' && echo connected"
        plain, boxed = run_both(tmp_path, command, box="{network: none}")
        _, host = run_both(tmp_path, command, box="{network: host}")
    assert plain.ok and "connected" in output(plain)
    assert host.ok and "connected" in output(host)
    assert not boxed.ok
    assert "connected" not in output(boxed) and "Connection refused" in output(boxed)


# -- processes ---------------------------------------------------------------------------------------------


def _alive(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline and b"sleep" in cmdline:
                found.append(int(entry))
    return found


def _gone_soon(marker: str) -> bool:
    deadline = time.monotonic() + 3
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(marker)


def _escape(seconds: str) -> str:
    """A daemon that leaves the group (setsid), forks again and clears its environment: what no
    process-group kill or token search can find once its parent is gone."""
    return f"setsid sh -c '(exec env -i sleep {seconds} &)'; sleep 0.2"


@pytest.mark.parametrize("ending", ["the call ends", "the call times out"])
def test_a_double_forked_setsid_child_is_gone_after_the_call(tmp_path: Path, ending: str) -> None:
    marker = f"{secrets.randbelow(10**6) + 1000}.{secrets.randbelow(900) + 100}"
    command = _escape(marker) + ("; sleep 30" if ending == "the call times out" else "")
    plain, boxed = run_both(tmp_path, command, timeout=1.5)
    try:
        escaped = _alive(marker)
        assert escaped, "without a sandbox the daemon outlives its call (the case the sandbox closes)"
    finally:
        for pid in _alive(marker):
            os.kill(pid, 9)
    assert boxed.exec is not None and boxed.exec.timed_out == (ending == "the call times out")
    assert plain.exec is not None and plain.exec.timed_out == (ending == "the call times out")
    assert _gone_soon(marker)


# -- system calls ------------------------------------------------------------------------------------------

_SYSCALLS = r"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": {"unshare": 272, "keyctl": 250, "ptrace": 101},
      "aarch64": {"unshare": 97, "keyctl": 219, "ptrace": 117}}
import platform
n = nr[platform.machine()]
for name, args in (("unshare", (0x10000000,)), ("keyctl", (0, -3, 0)), ("ptrace", (0, 0, 0, 0))):
    r = libc.syscall(n[name], *args)
    print(name, "refused" if r == -1 and ctypes.get_errno() == errno.EPERM else "allowed")
"""


def test_the_seccomp_filter_refuses_escape_system_calls(tmp_path: Path) -> None:
    python = "/usr/bin/python3"
    if not os.path.exists(python):
        pytest.skip("no /usr/bin/python3 to make the system calls with")
    script = tmp_path / "calls.py"
    script.write_text(_SYSCALLS)
    text = f"""\
group: t
tools:
  - name: plain
    exec: {python} calls.py
    cwd: .
  - name: boxed
    exec: {python} calls.py
    cwd: .
    sandbox: true
"""
    svc = service(tmp_path, text)
    plain, boxed = call(svc, "t.plain"), call(svc, "t.boxed")
    assert "unshare allowed" in output(plain) and "keyctl allowed" in output(plain)  # the kernel allows them here
    assert output(boxed).split() == ["unshare", "refused", "keyctl", "refused", "ptrace", "refused"], output(boxed)


def test_the_filter_checks_the_architecture() -> None:
    x86, arm = seccomp.program("x86_64"), seccomp.program("aarch64")
    assert x86 != arm and len(x86) % 8 == 0
    assert (0xC000003E).to_bytes(4, sys.byteorder) in x86
    with pytest.raises(ValueError, match="riscv64"):
        seccomp.program("riscv64")


def test_no_new_privileges_no_capabilities_and_own_namespaces(tmp_path: Path) -> None:
    command = "grep -E '^(NoNewPrivs|CapEff|Seccomp):' /proc/self/status; ls /proc | grep -c '^[0-9]'"
    plain, boxed = run_both(tmp_path, command)
    lines = output(boxed).split("\n")
    assert "NoNewPrivs:\t1" in lines and "CapEff:\t0000000000000000" in lines and "Seccomp:\t2" in lines
    assert int(lines[3]) <= 4  # bwrap (the namespace init), the shell, ls, grep: the host has many more
    assert int(output(plain).split("\n")[-2]) > 3


# -- failing closed ----------------------------------------------------------------------------------------

_BOXED = """\
group: t
tools:
  - name: boxed
    exec: touch {flag}
    sandbox: true
"""


def test_a_sandboxed_tool_without_bwrap_refuses_to_run(tmp_path: Path) -> None:
    flag = tmp_path / "ran"
    catalog = write_catalog(tmp_path, _BOXED.format(flag=flag))
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    done = subprocess.run(
        [sys.executable, "-m", "toolrun", "call", "-c", str(catalog), "t.boxed"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "SandboxUnavailable" in done.stderr
    assert "tool t.boxed runs in a sandbox, and bwrap (bubblewrap) is not installed here" in done.stderr
    assert "it was not run" in done.stderr
    assert not flag.exists()
    checked = subprocess.run(
        [sys.executable, "-m", "toolrun", "validate-catalog", str(catalog)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0
    assert "t.boxed: warning: its sandbox cannot be enforced on this host" in checked.stdout


def test_a_kernel_that_refuses_the_sandbox_fails_the_call_with_bwraps_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    flag = tmp_path / "ran"
    svc = service(tmp_path, _BOXED.format(flag=flag))
    with pytest.raises(SandboxUnavailable, match="No permissions to create new namespace"):
        call(svc, "t.boxed")
    assert not flag.exists()
    problem = svc.sandbox_problem()
    assert problem is not None and "No permissions to create new namespace" in problem
    with pytest.raises(SandboxUnavailable):
        asyncio.run(svc.readiness_checks()["sandbox"]())
    entry = svc.entry(svc.describe(OPERATOR, "t.boxed"))["sandbox"]
    assert entry["enforced"] is False and "No permissions" in entry["reason"]


def test_a_missing_writable_path_fails_the_call_naming_it(tmp_path: Path) -> None:
    text = """\
group: t
tools:
  - name: boxed
    exec: echo hi
    sandbox: {writable: [gone]}
"""
    with pytest.raises(SandboxUnavailable, match=f"binds {tmp_path}/gone, which does not exist"):
        call(service(tmp_path, text), "t.boxed")


# -- what the doors show -----------------------------------------------------------------------------------


def test_the_entry_the_dry_run_and_readiness_show_an_enforced_sandbox(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()  # not tmp_path itself: it holds the test's TOOLRUN_HOME, which no tool may write
    svc = service(tmp_path, "group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    sandbox: {writable: [out]}\n")
    entry = svc.entry(svc.describe(OPERATOR, "t.boxed"))
    assert entry["sandbox"] == {
        "profile": "default",
        "network": "none",
        "readable": [],
        "writable": [str(tmp_path / "out")],
        "enforced": True,
    }
    plan = svc.plan(OPERATOR, "t.boxed", {})
    assert plan["sandbox"] == entry["sandbox"]
    assert svc.sandbox_problem() is None
    asyncio.run(svc.readiness_checks()["sandbox"]())


def test_a_sandboxed_call_costs_a_few_milliseconds(tmp_path: Path) -> None:
    """Not a benchmark (bench/sandbox.py is): a guard against a set-up gone wildly slow."""
    svc = service(tmp_path, "group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    sandbox: true\n")

    async def many() -> float:
        started = time.perf_counter()
        for _ in range(10):
            assert (await svc.call(OPERATOR, "t.boxed", {})).value == "hi\n"
        return (time.perf_counter() - started) / 10

    assert asyncio.run(many()) < 0.25


def test_settings_add_the_audit_log_to_what_sandboxes_hide(tmp_path: Path) -> None:
    audit = tmp_path / "logs" / "audit.jsonl"
    settings = Settings.load(environ={"TOOLRUN_HOME": str(tmp_path / "home"), "SVC_AUDIT_LOG": str(audit)})
    assert str(audit) in sandbox.private_paths(settings=settings)
    assert str(tmp_path / "home" / "data") in sandbox.private_paths()


def _fake_refusing_bwrap(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = directory / "fakebin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")


@pytest.mark.parametrize("host", ["bwrap works", "the kernel refuses"])
def test_the_http_tool_entry_and_readyz_report_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    from starlette.testclient import TestClient

    from toolrun.server.run import build_app

    if host == "the kernel refuses":
        _fake_refusing_bwrap(tmp_path, monkeypatch)
    catalog = write_catalog(
        tmp_path,
        "group: t\ntools:\n  - name: boxed\n    public: true\n    exec: echo hi\n    sandbox: {network: host}\n",
    )
    settings = Settings.load(environ={"TOOLRUN_HOME": str(tmp_path / "home")})
    with TestClient(build_app(settings, [str(catalog)]), base_url="http://127.0.0.1") as client:
        entry = client.get("/tools/t.boxed").json()
        ready = client.get("/readyz")
        called = client.post("/tools/t.boxed", content=b"{}", headers={"content-type": "application/json"})
    box = entry["sandbox"]
    assert (box["profile"], box["network"], box["writable"]) == ("default", "host", [])
    if host == "bwrap works":
        assert box["enforced"] is True and "reason" not in box
        assert ready.status_code == 200
        assert called.status_code == 200 and called.text == "hi\n"
    else:
        assert box["enforced"] is False and "uid map: Permission denied" in box["reason"]
        assert ready.status_code == 503 and ready.json() == {"status": "degraded"}
        assert called.status_code == 503  # the server cannot serve this tool here: not a 500
        assert called.text.startswith("SandboxUnavailable: tool t.boxed runs in a sandbox that cannot be set up")
        assert "uid map" not in called.text  # the reason (paths, bwrap's words) goes to the server's log only


def test_access_explain_says_a_tool_is_not_callable_where_its_sandbox_cannot_be_enforced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolrun.access.explain import explain, explain_text

    tool = service(tmp_path, _BOXED.format(flag="x").replace("exec:", "public: true\n    exec:")).describe(
        OPERATOR, "t.boxed"
    )
    answer = asyncio.run(explain(tool_key="t.boxed", tool=tool, username="", store=None))
    assert answer["callable"] is True and answer["sandbox"]["enforced"] is True
    assert "sandbox: default (network none; enforced here)" in explain_text(answer)
    _fake_refusing_bwrap(tmp_path, monkeypatch)
    answer = asyncio.run(explain(tool_key="t.boxed", tool=tool, username="", store=None))
    assert answer["visible"] is True and answer["callable"] is False
    assert any("its sandbox cannot be enforced on this host" in r for r in answer["reasons"])
    assert "NOT enforceable here" in explain_text(answer)


def test_a_sandboxed_tool_can_also_drop_to_another_user(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("user: needs toolrun to run as root")
    text = "group: t\ntools:\n  - name: boxed\n    exec: id -u; ls /root\n    user: nobody\n    sandbox: true\n"
    result = call(service(tmp_path, text), "t.boxed")
    assert result.exec is not None
    assert result.exec.stdout.splitlines()[0] == "65534"
    assert "No such file" in result.exec.stderr


def test_describe_and_dry_run_print_the_sandbox(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolrun.cli import app

    catalog = write_catalog(
        tmp_path, "group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    sandbox: {writable: [.]}\n"
    )
    runner = CliRunner()
    described = runner.invoke(app, ["describe", "-c", str(catalog), "t.boxed"])
    assert described.exit_code == 0, described.output
    assert f"sandbox: default (network none; writable {tmp_path}; enforced here)" in described.output
    planned = runner.invoke(app, ["call", "-c", str(catalog), "t.boxed", "--dry-run"])
    assert planned.exit_code == 0, planned.output
    assert f"sandbox: default (network none; writable {tmp_path}; enforced here)" in planned.output
    assert "cwd: /tmp (the sandbox's own)" in planned.output


def test_serve_says_at_start_when_its_sandboxed_tools_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from toolrun.server.run import build_parts

    _fake_refusing_bwrap(tmp_path, monkeypatch)
    catalog = write_catalog(tmp_path, _BOXED.format(flag=tmp_path / "ran"))
    settings = Settings.load(environ={"TOOLRUN_HOME": str(tmp_path / "home")})
    with caplog.at_level("WARNING", logger="toolrun.server"):
        build_parts(settings, [str(catalog)])
    assert "1 sandboxed tool(s) cannot run on this host (t.boxed)" in caplog.text
    assert "uid map: Permission denied" in caplog.text


def test_a_writable_path_holding_toolruns_own_files_is_refused(tmp_path: Path, _isolated_home: Path) -> None:
    (_isolated_home / "data").mkdir(parents=True)
    flag = tmp_path / "ran"
    text = f"group: t\ntools:\n  - name: boxed\n    exec: touch {flag}\n    sandbox: {{writable: [{tmp_path}]}}\n"
    with pytest.raises(SandboxUnavailable, match=f"its writable path {tmp_path} holds toolrun's own"):
        call(service(tmp_path, text), "t.boxed")
    assert not flag.exists()


def test_a_sandboxed_curl_tool_keeps_the_network_but_not_the_files(tmp_path: Path, _isolated_home: Path) -> None:
    require_binary("curl")
    import http.server
    import threading

    secret = _isolated_home / "data" / "secret.txt"
    secret.parent.mkdir(parents=True)
    secret.write_text("do not send\n")
    received: list[bytes] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"pong")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        text = f"""\
group: t
tools:
  - name: upload
    curl: -d @{secret} {url}
    sandbox: {{readable: [{tmp_path}]}}
  - name: plain
    curl: -d @{secret} {url}
"""
        svc = service(tmp_path, text)
        call(svc, "t.plain")
        assert received == [b"do not send"]  # without a sandbox, curl reads the file and sends it
        received.clear()
        result = call(svc, "t.upload")
    finally:
        server.shutdown()
        server.server_close()
    assert result.exec is not None
    assert result.exec.stdout == "pong"  # the host's network: the request went out
    assert b"do not send" not in b"".join(received)  # toolrun's data folder is covered, even under `readable`


def test_a_host_fixed_after_a_failed_probe_serves_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = require_binary("bwrap")
    fixed = tmp_path / "fixed"
    fake = tmp_path / "fakebin"
    fake.mkdir()
    script = f"#!/bin/sh\n[ -e {fixed} ] && exec {real} \"$@\"\necho 'bwrap: user namespaces are off' >&2\nexit 1\n"
    (fake / "bwrap").write_text(script)
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    svc = service(tmp_path, "group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    sandbox: true\n")
    assert "user namespaces are off" in (svc.sandbox_problem() or "")
    fixed.touch()
    assert "user namespaces are off" in (svc.sandbox_problem() or "")  # a failure is trusted for a while
    monkeypatch.setattr(sandbox, "RETRY_AFTER", 0.0)
    assert svc.sandbox_problem() is None
    assert call(svc, "t.boxed").value == "hi\n"


def test_describe_with_url_shows_the_servers_sandbox_and_whether_the_server_can_enforce_it(tmp_path: Path) -> None:
    """`toolrun --url ... describe` prints the serving host's word on the sandbox, not a guess made where the CLI
    runs: a server whose bwrap refuses says NOT enforceable, while this host's bwrap works."""
    from support.servers import ToolrunServer, toolrun_cli

    require_binary("bwrap")
    catalog = write_catalog(
        tmp_path,
        "group: t\ntools:\n  - name: boxed\n    public: true\n    exec: echo hi\n    sandbox: {network: host}\n",
    )
    refusing = tmp_path / "fakebin"
    refusing.mkdir()
    (refusing / "bwrap").write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    (refusing / "bwrap").chmod(0o755)
    for name, path in (("works", os.environ["PATH"]), ("refuses", f"{refusing}:{os.environ['PATH']}")):
        server = ToolrunServer(tmp_path / name, catalog, {"SVC_WORKERS": 1})
        server.env["PATH"] = path
        with server.start():
            shown = toolrun_cli(
                "--url", server.url, "describe", "t.boxed", env=server.env | {"PATH": os.environ["PATH"]}
            )
            as_json = toolrun_cli("--url", server.url, "describe", "t.boxed", "--json", env=server.env)
        assert shown.returncode == 0, shown.stderr
        box = json.loads(as_json.stdout)["sandbox"]
        if name == "works":
            assert "sandbox: default (network host; enforced here)" in shown.stdout
            assert box["enforced"] is True
        else:
            assert "sandbox: default (network host; NOT enforceable here: " in shown.stdout
            assert "uid map: Permission denied" in shown.stdout
            assert box["enforced"] is False
