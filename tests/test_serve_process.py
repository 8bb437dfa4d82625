"""The real `toolrun serve` process on a real port, over loopback; then SIGTERM.

Serial smoke tests: each starts `.venv/bin/toolrun serve` with its own TOOLRUN_HOME and a free
port, waits (bounded) for /healthz, talks to it with httpx and stops it with SIGTERM.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.servers import free_port
from toolrun.state.sqlite import SQLiteKeyStore

TOOLRUN = str(Path(sys.executable).parent / "toolrun")
STARTUP_DEADLINE = 30.0
EXIT_DEADLINE = 10.0

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


@dataclass
class Served:
    process: subprocess.Popen[str]
    url: str
    home: Path
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=EXIT_DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"toolrun serve did not exit within {EXIT_DEADLINE}s of SIGTERM:\n{self.stderr()}")


@pytest.fixture
def start(tmp_path: Path) -> Iterator[object]:
    started: list[Served] = []

    def run(*extra: str, env: dict[str, str] | None = None) -> Served:
        catalog = write_catalog(tmp_path, CATALOG)
        (tmp_path / "smoke_fns.py").write_text(FNS, encoding="utf-8")
        home = tmp_path / "toolrun-home"
        port = free_port()
        stderr_path = tmp_path / f"serve-{port}.log"
        environ = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
        environ.update({"TOOLRUN_HOME": str(home), **(env or {})})
        with stderr_path.open("w") as err:
            process = subprocess.Popen(
                [TOOLRUN, "serve", "-c", str(catalog), "--port", str(port), *extra],
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                text=True,
            )
        served = Served(process, f"http://127.0.0.1:{port}", home, stderr_path)
        started.append(served)
        wait_until_up(served)
        return served

    yield run
    for served in started:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait()


def wait_until_up(served: Served) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            pytest.fail(f"toolrun serve exited with {served.process.returncode}:\n{served.stderr()}")
        try:
            if httpx.get(served.url + "/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # polling a starting process: the one bounded wait of this module
    pytest.fail(f"toolrun serve did not answer /healthz within {STARTUP_DEADLINE}s:\n{served.stderr()}")


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


def test_serve_answers_over_loopback_and_exits_0_on_sigterm(start: object, tmp_path: Path) -> None:
    home = tmp_path / "toolrun-home"
    key, _ = SQLiteKeyStore(home / "data" / "toolrun.db").create_key("alice", ["ops"])
    served = start("--log-level", "debug")  # type: ignore[operator]
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
    assert sigpipe_ignored(served.process.pid)
    assert served.stop() == 0
    log = served.stderr()
    assert "Traceback" not in log, log
    assert "api-key=[redacted]" in log  # debug level: the access log ran, and hid the key
    assert key not in log and key.split("_", 2)[2] not in log


def sigpipe_ignored(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGPIPE - 1)))
    raise AssertionError("no SigIgn line")


def test_sigterm_lets_an_in_flight_call_finish_and_leaves_no_child(start: object) -> None:
    served = start()  # type: ignore[operator]
    seconds = unique_seconds(1)
    results: list[httpx.Response] = []

    def call() -> None:
        results.append(httpx.post(served.url + "/tools/smoke.sleep", json={"seconds": seconds}, timeout=30))

    caller = threading.Thread(target=call)
    caller.start()
    wait_for_processes(seconds, 2)  # the shell and its sleep
    assert served.stop() == 0
    caller.join(timeout=30)
    assert [(r.status_code, r.text) for r in results] == [(200, f"slept {seconds}")]
    assert matching(seconds) == []


def test_sigterm_kills_a_call_that_outlives_the_grace_period_and_its_children(start: object) -> None:
    served = start(env={"SVC_SHUTDOWN_GRACE": "1"})  # type: ignore[operator]
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
    assert served.stop() == 0
    assert time.monotonic() - began < 5
    caller.join(timeout=30)
    assert matching(seconds) == [], "a child of the cancelled call survived the server"


def test_serve_audit_log_flag_writes_the_trail_to_the_file(start: object, tmp_path: Path) -> None:
    trail = tmp_path / "audit.jsonl"
    served = start("--audit-log", str(trail))  # type: ignore[operator]
    with httpx.Client(base_url=served.url, timeout=10) as client:
        assert client.post("/tools/smoke.echo", json={"msg": "audited"}).text == "audited"
    assert served.stop() == 0
    records = [json.loads(line) for line in trail.read_text(encoding="utf-8").splitlines()]
    assert [r["tool"] for r in records] == ["smoke.echo"], records
