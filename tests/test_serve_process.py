"""The real `toolrun serve` process on a real port, over loopback; then SIGTERM.

Smoke tests: each starts `toolrun serve` (support.servers.ToolrunServer) with its own TOOLRUN_HOME and a free
port, waits (bounded) for /healthz, talks to it with httpx and stops it with SIGTERM: it must exit 0 within
EXIT_DEADLINE (SIGKILL after it: a status of -9).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.servers import Processes, ToolrunServer
from toolrun.access import Access
from toolrun.state.sqlite import SQLiteKeyStore

STARTUP_DEADLINE = 30.0
EXIT_DEADLINE = 10.0
Start = Callable[..., ToolrunServer]  # the `start` fixture

CATALOG = """\
version: 1
group: smoke
tools:
  - name: echo
    public: true
    exec: printf '%s' {{ msg | quote }}
    params:
      - name: msg
        type: str
  - name: sleep
    public: true
    description: Sleep, then say so (the duration doubles as a unique marker for pgrep).
    exec: sleep {{ seconds }}; printf 'slept %s' {{ seconds }}
    timeout: 120
    params:
      - name: seconds
        type: str
        pattern: "[0-9]+[.][0-9]+"
  - name: nostdin
    public: true
    description: Takes a large JSON payload on stdin and never reads it.
    stdin: true
    exec: printf ignored
    params:
      - name: blob
        type: str
  - name: noop
    public: true
    fn: smoke_fns:noop
  - name: private
    group: ops
    exec: printf secret
"""

FNS = """\
def noop() -> str:
    return "ok"
"""


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    """`start(*serve_args, env={...})`: a started server of CATALOG; every one is stopped at the end."""
    catalog = write_catalog(tmp_path, CATALOG)
    (tmp_path / "smoke_fns.py").write_text(FNS, encoding="utf-8")
    with Processes() as procs:

        def run(*extra: str, env: dict[str, str] | None = None) -> ToolrunServer:
            workdir = tmp_path / f"serve-{len(procs.started)}"
            server = ToolrunServer(workdir, catalog, env, home=tmp_path / "toolrun-home", args=extra)
            return procs.add(server).start(STARTUP_DEADLINE)

        yield run


def matching(marker: str) -> list[int]:
    """PIDs whose command line contains `marker` (pgrep -f), this test process excluded."""
    pgrep = require_binary("pgrep")
    done = subprocess.run([pgrep, "-f", marker], capture_output=True, text=True, check=False)
    return [int(p) for p in done.stdout.split() if int(p) != os.getpid()]


def wait_for_processes(marker: str, count: int) -> list[int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = matching(marker)
        if len(pids) >= count:
            return pids
        time.sleep(0.02)
    pytest.fail(f"no process matching {marker!r} appeared")


def unique_seconds(whole: int) -> str:
    """A sleep duration that is also a marker no other process has: e.g. 1.000482913."""
    return f"{whole}.000{random.randrange(10**8, 10**9)}"


def test_serve_answers_over_loopback_and_exits_0_on_sigterm(start: Start, tmp_path: Path) -> None:
    home = tmp_path / "toolrun-home"
    key, _ = Access(SQLiteKeyStore(home / "data" / "toolrun.db")).create_key("alice", ["ops"])
    served = start("--log-level", "debug")
    with httpx.Client(base_url=served.url, timeout=10) as client:
        assert client.get("/readyz").json() == {"status": "ok"}
        anonymous = [t["key"] for t in client.get("/tools").json()]
        assert anonymous == ["smoke.echo", "smoke.noop", "smoke.nostdin", "smoke.sleep"]
        mine = [t["key"] for t in client.get("/tools", params={"api-key": key}).json()]
        assert mine == ["ops.private", *anonymous]
        called = client.post("/tools/smoke.echo", json={"msg": "over the wire"})
        assert (called.status_code, called.text) == (200, "over the wire")
        assert client.post("/tools/ops.private", headers={"X-API-Key": key}).text == "secret"
        assert client.post("/tools/smoke.noop").text == "ok"
        unauthorized = client.get("/whoami")
        assert (unauthorized.status_code, unauthorized.json()) == (401, {"error": "unauthorized"})
        assert client.get("/whoami", params={"api-key": key}).json()["username"] == "alice"
        assert client.get("/whoami", headers={"Authorization": f"Bearer {key}"}).status_code == 200
        metrics = client.get("/metrics").text
        assert 'svc_tool_calls_total{outcome="ok",tool="smoke.echo"} 1.0' in metrics
        assert client.get("/healthz", headers={"host": "evil.example"}).status_code == 400
        # More than a pipe buffer of JSON for a child that never reads its stdin: EPIPE is that call's
        # business, never the server's death.
        ignored = client.post("/tools/smoke.nostdin", json={"blob": "x" * 300_000})
        assert (ignored.status_code, ignored.text) == (200, "ignored")
    # `toolrun` sets SIGPIPE to its default action for shell pipes (`toolrun list | head`). A server must
    # ignore it: else a reply written into a connection its client already closed (wrk does that to its
    # connections at the end of every run: bench/http_routes.py) kills the whole process with status 141.
    assert sigpipe_ignored(served.pid)
    assert served.stop(timeout=EXIT_DEADLINE) == 0
    log = served.log()
    assert "Traceback" not in log, log
    assert "api-key=[redacted]" in log  # debug level: the access log ran, and hid the key
    assert key not in log and key.split("_", 2)[2] not in log


def sigpipe_ignored(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGPIPE - 1)))
    raise AssertionError("no SigIgn line")


def test_sigterm_lets_an_in_flight_call_finish_and_leaves_no_child(start: Start) -> None:
    served = start()
    seconds = unique_seconds(1)
    results: list[httpx.Response] = []

    def call() -> None:
        results.append(httpx.post(served.url + "/tools/smoke.sleep", json={"seconds": seconds}, timeout=30))

    caller = threading.Thread(target=call)
    caller.start()
    wait_for_processes(seconds, 2)  # the shell and its sleep
    assert served.stop(timeout=EXIT_DEADLINE) == 0
    caller.join(timeout=30)
    assert [(r.status_code, r.text) for r in results] == [(200, f"slept {seconds}")]
    assert matching(seconds) == []


def test_sigterm_kills_a_call_that_outlives_the_grace_period_and_its_children(
    start: Start,
) -> None:
    served = start(env={"SVC_SHUTDOWN_GRACE": "1"})
    seconds = unique_seconds(60)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            httpx.post(served.url + "/tools/smoke.sleep", json={"seconds": seconds}, timeout=30)
        except httpx.HTTPError as exc:
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    wait_for_processes(seconds, 2)
    began = time.monotonic()
    assert served.stop(timeout=EXIT_DEADLINE) == 0
    assert time.monotonic() - began < 5
    caller.join(timeout=30)
    assert matching(seconds) == [], "a child of the cancelled call survived the server"


def test_serve_audit_log_flag_writes_the_trail_to_the_file(start: Start, tmp_path: Path) -> None:
    trail = tmp_path / "audit.jsonl"
    served = start("--audit-log", str(trail))
    with httpx.Client(base_url=served.url, timeout=10) as client:
        assert client.post("/tools/smoke.echo", json={"msg": "audited"}).text == "audited"
    assert served.stop(timeout=EXIT_DEADLINE) == 0
    records = [json.loads(line) for line in trail.read_text(encoding="utf-8").splitlines()]
    assert [r["tool"] for r in records] == ["smoke.echo"], records
