"""What tracing costs a call: `toolrun serve` with tracing off and on, side by side in one run (a script, not a test).

    .venv/bin/python bench/tracing.py                 # about a minute on 2 cores
    .venv/bin/python bench/tracing.py --calls 300 --rounds 1   # a smoke run

Two single-process servers (`--workers 1`) serve the same catalog: one with no OTEL_* variable (tracing
off: nothing of OpenTelemetry imported), one exporting every span over OTLP/HTTP to a receiver in a
process of its own (tests/support/otlp.py, counting what it decodes: the spans really go out). Each
round sends `--calls` sequential requests on one keep-alive connection to each server in turn:

    exec     POST /tools/bench.echo      an exec tool, `printf '%s' {{ msg | quote }}` (a process per call)
    fn       POST /tools/bench.ifn_echo  an `inline: true` fn tool (no process, no thread: the pure overhead)
    mcp      POST /mcp                   MCP `execute` of that fn tool, a raw 2026-07-28 request (toolrun's fast
                                         path; with tracing on it runs the MCP SDK's span middleware: 3 spans)
    healthz  GET /healthz                no tool call: the request span alone

interleaved in chunks of 100 (so a burst of other load hits each server alike), and reads the server's
CPU time (utime + stime of the server process, tool processes excluded) around each chunk. A third
server is traced but samples nothing (`OTEL_TRACES_SAMPLER=always_off`): spans made, context passed on to
the tools, nothing recorded or exported. Printed per route: median and p99 latency as the client saw it and
server CPU per request, for each server, and the difference against off (what one traced call costs); the
median of `--rounds` rounds (the machine may be shared: the load average is printed). Exits 0.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

CATALOG = """\
group: bench
tools:
  - name: echo
    public: true
    exec: printf '%s' {{ msg | quote }}
    params:
      - {name: msg, type: str}
  - name: ifn_echo
    public: true
    fn: bench_fns:echo
    inline: true
"""
FNS = "def echo(msg: str) -> str:\n    return msg\n"
CHUNK = 100
ROUTES = {
    "exec": ("POST", "/tools/bench.echo"),
    "fn": ("POST", "/tools/bench.ifn_echo"),
    "mcp": ("POST", "/mcp"),
    "healthz": ("GET", "/healthz"),
}
MCP_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "execute",
            "arguments": {"key": "bench.ifn_echo", "arguments": {"msg": "hi"}},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    },
    separators=(",", ":"),
).encode()
MCP_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "execute",
}


def sink(port_file: str) -> None:
    """The OTLP receiver, in its own process: writes its port, then the span count on SIGUSR1."""
    from support.otlp import OtlpReceiver

    with OtlpReceiver(keep=False) as receiver:
        Path(port_file).write_text(receiver.endpoint, encoding="utf-8")
        signal.signal(signal.SIGUSR1, lambda *_: Path(port_file + ".count").write_text(str(receiver.count)))
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while True:
            time.sleep(1)


def free_port() -> int:
    from support.servers import free_port as port

    return port()


def wait_for(predicate: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, name: str, workdir: Path, env: dict[str, str]) -> None:
        self.name = name
        self.port = free_port()
        argv = [sys.executable, "-m", "toolrun", "serve", "-c", str(workdir / "tools.yaml")]
        argv += ["--host", "127.0.0.1", "--port", str(self.port), "--workers", "1", "--log-level", "warning"]
        self.log = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, env=env, cwd=workdir, stdout=self.log, stderr=self.log)
        wait_for(self.up, f"{name} server")

    def up(self) -> bool:
        if self.proc.poll() is not None:
            raise SystemExit(f"{self.name} server exited: {Path(self.log.name).read_text()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
            conn.request("GET", "/healthz")
            return conn.getresponse().status == 200
        except OSError:
            return False

    def measure(self, route: str, calls: int, times: list[float]) -> float:
        """`calls` requests on a new keep-alive connection (the server closes idle ones after 5 s); their
        latencies go to `times`; returns the server's CPU seconds meanwhile."""
        method, path = ROUTES[route]
        body = b'{"msg": "hi"}' if method == "POST" else None
        headers = {"content-type": "application/json"} if body else {}
        if route == "mcp":
            body, headers = MCP_BODY, MCP_HEADERS
        conn = http.client.HTTPConnection("127.0.0.1", self.port)
        cpu = cpu_seconds(self.proc.pid)
        for _ in range(calls):
            started = time.perf_counter()
            conn.request(method, path, body=body, headers=headers)
            answer = conn.getresponse()
            answer.read()
            times.append(time.perf_counter() - started)
            assert answer.status == 200, answer.status
        cpu = cpu_seconds(self.proc.pid) - cpu
        conn.close()
        return cpu

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        self.log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sink", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sink:
        sink(args.sink)
        return
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="toolrun-bench-tracing-") as tmp:
        work = Path(tmp)
        (work / "tools.yaml").write_text(CATALOG, encoding="utf-8")
        (work / "bench_fns.py").write_text(FNS, encoding="utf-8")
        port_file = str(work / "sink")
        receiver = subprocess.Popen([sys.executable, __file__, "--sink", port_file])
        wait_for(lambda: Path(port_file).exists(), "the OTLP receiver")
        endpoint = Path(port_file).read_text(encoding="utf-8")
        base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SVC_"))}
        base |= {"TOOLRUN_HOME": str(work / "home"), "PYTHONPATH": str(work)}
        traced = base | {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "bench"}
        servers = [
            Server("off", work, base),
            Server("on", work, traced),
            # Spans made and context passed on, nothing recorded or exported: what a sampled-out call costs.
            Server("unsampled", work, traced | {"OTEL_TRACES_SAMPLER": "always_off"}),
        ]
        try:
            results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
            for _ in range(args.rounds):
                for route in ROUTES:
                    for server in servers:
                        server.measure(route, 100, [])  # warm-up
                    # Interleaved in chunks of CHUNK calls, so a burst of load elsewhere hits every server alike.
                    times: dict[str, list[float]] = {server.name: [] for server in servers}
                    cpu = dict.fromkeys(times, 0.0)
                    for _ in range(max(1, args.calls // CHUNK)):
                        for server in servers:
                            cpu[server.name] += server.measure(route, CHUNK, times[server.name])
                    for name, got in times.items():
                        figure = (statistics.median(got), statistics.quantiles(got, n=100)[98], cpu[name] / len(got))
                        results.setdefault((route, name), []).append(figure)
        finally:
            for server in servers:
                server.stop()
            receiver.send_signal(signal.SIGUSR1)
            wait_for(lambda: Path(port_file + ".count").exists(), "the span count", 5)
            spans = int(Path(port_file + ".count").read_text())
            receiver.terminate()
            receiver.wait(10)
    report(results, spans)
    print(f"load average after: {os.getloadavg()}")


def report(results: dict[tuple[str, str], list[tuple[float, float, float]]], spans: int) -> None:
    us = 1e6
    print(f"\n{'route':8} {'tracing':10} {'p50 ms':>8} {'p99 ms':>8} {'server CPU us/req':>18}")
    figures: dict[str, dict[str, tuple[float, float]]] = {}
    for (route, name), rounds in results.items():
        # The median round of each figure (several rounds: a disturbed one does not decide).
        p50 = statistics.median(r[0] for r in rounds)
        p99 = statistics.median(r[1] for r in rounds)
        cpu = statistics.median(r[2] for r in rounds)
        figures.setdefault(route, {})[name] = (p50, cpu)
        print(f"{route:8} {name:10} {p50 * 1000:8.3f} {p99 * 1000:8.3f} {cpu * us:18.0f}")
    print("\nwhat tracing adds to one request (against off):")
    for route, f in figures.items():
        for name in ("on", "unsampled"):
            p50 = (f[name][0] - f["off"][0]) * us
            cpu = (f[name][1] - f["off"][1]) * us
            print(f"  {route:8} {name:10} latency {p50:+6.0f} us (p50), server CPU {cpu:+6.0f} us/request")
    print(f"spans the receiver decoded: {spans}")
    print(json.dumps({"spans": spans, "figures": figures}))


if __name__ == "__main__":
    main()
