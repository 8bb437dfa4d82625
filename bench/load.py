"""Load figures of one `toolrun serve` (a script, not a test; see bench/README.md).

- 200 concurrent calls of a tool `exec: sleep {{ seconds }}` with seconds=1, each on its own connection:
  p50 / p99 / max (target, issue 14: p99 at most 1.15 s). The calls come from ApacheBench (`ab -n 200 -c 200`,
  Debian's apache2-utils: C, one event loop), as wrk's do in bench/http_routes.py: on a 2-CPU machine the client's
  CPU is taken from the server's, and Python's asyncio streams spend about 0.5 ms of CPU per call, some 50 ms of a
  burst. The asyncio client's figure is printed beside it (it is the client of the figures before 2026-11-24).
  From the same run, the same 200 calls to
  - adnanh/webhook (Debian `webhook`), running `/bin/sh -c "sleep 1"` per call;
  - a bare Starlette route on uvicorn that runs `sleep <seconds>` with no shell (asyncio subprocess, pidfd
    watcher): what a Python HTTP server that does nothing else does;
  and the floors, with no HTTP at all: this script's own processes starting 200 `/bin/sh -c "sleep 1"` or
  `sleep 1` back to back (os.posix_spawn), from one process, and from as many processes as toolrun has workers;
  each latency from the first start to that child's exit. Every call starts one or two programs, about 1-2 ms
  of CPU each on a small VM, so the last of 200 starts late by about 200 x the CPU per call / the cores.
- 1,000 concurrent POSTs to an echo tool: how many 200s and 503s (the documented overload answer),
  and the slowest /healthz seen meanwhile.
- The burst by worker count (issue 23.9): the same 200 `sleep 1` calls against `toolrun serve --workers W` for W
  = 1, 2 and the CPU count, each beside the no-HTTP floor of W processes. The kernel does not spread connections
  evenly over the workers: with a cap shared per worker (before 2026-11-26) a burst under the cap in total could
  still wait a second for a slot in a full worker; `--cap` sets `max_concurrent_calls` for this part (a cap just
  over the burst, like 210, shows it on a small machine where the default 256 splits into halves no burst fills).

Run: .venv/bin/python bench/load.py [--rounds 3] [--workers N] [--cap N] [--only-workers]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.catalogs import SLEEPERS  # noqa: E402
from support.http import JSON, raw_call  # noqa: E402
from support.servers import free_port, serve_catalog  # noqa: E402

TARGET_P99 = 1.15


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def warm(port: int, path: str) -> None:
    await asyncio.gather(*(raw_call(port, "POST", path, b'{"seconds": 0.01}', JSON) for _ in range(20)))


async def sleepers(port: int, path: str = "/tools/ops.sleep") -> list[float]:
    """The 200 `sleep 1` calls from this script's asyncio streams (raw_call), one connection each."""
    await warm(port, path)
    results = await asyncio.gather(*(raw_call(port, "POST", path, b'{"seconds": 1}', JSON) for _ in range(200)))
    assert all(status == 200 for status, *_ in results), {status for status, *_ in results}
    return [took for *_, took in results]


def bare_sleepers(n: int = 200, shell: bool = True, processes: int = 1) -> list[float]:
    """n `/bin/sh -c "sleep 1"` (or `sleep 1` with no shell) started back to back with os.posix_spawn (no HTTP) by
    `processes` forked spawners, n / processes each: seconds from the common start to each child's exit."""
    argv = ["/bin/sh", "-c", "sleep 1"] if shell else [shutil.which("sleep") or "/bin/sleep", "1"]
    env = dict(os.environ)
    read, write = os.pipe()
    started = time.monotonic()
    spawners = []
    for _ in range(processes):
        pid = os.fork()
        if pid == 0:  # a spawner: start its share, wait for each, report the latencies
            code = 1
            try:
                os.close(read)
                children = [os.posix_spawn(argv[0], argv, env, setsid=True) for _ in range(n // processes)]
                took = []
                for _ in children:
                    os.wait()
                    took.append(time.monotonic() - started)
                os.write(write, (" ".join(f"{t:.6f}" for t in took) + " ").encode())
                code = 0
            finally:
                os._exit(code)
        spawners.append(pid)
    os.close(write)
    with os.fdopen(read, "rb") as reports:
        latencies = [float(t) for t in reports.read().split()]
    failed = [pid for pid in spawners if os.waitpid(pid, 0)[1] != 0]
    if failed or len(latencies) != n // processes * processes:
        raise SystemExit(f"the bare spawn of {argv} failed in {len(failed)} of {processes} spawner(s)")
    return latencies


def ab_sleepers(port: int, path: str, directory: Path) -> list[float]:
    """The 200 `sleep 1` calls from ApacheBench, one connection each: seconds from each connect to its answer."""
    body, times = directory / "sleep.json", directory / "ab.tsv"
    body.write_text('{"seconds": 1}')
    asyncio.run(warm(port, path))
    argv = ["ab", "-q", "-n", "200", "-c", "200", "-s", "30", "-p", str(body), "-T", "application/json"]
    done = subprocess.run(
        [*argv, "-g", str(times), f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, check=False
    )
    complete = re.search(r"^Complete requests:\s+(\d+)", done.stdout, re.M)
    failed = re.search(r"^Failed requests:\s+(\d+)", done.stdout, re.M)
    if done.returncode or not complete or complete[1] != "200" or not failed or failed[1] != "0":
        raise SystemExit(f"ab against {path} failed:\n{done.stdout}{done.stderr}")
    if "Non-2xx responses" in done.stdout:
        raise SystemExit(f"ab against {path}: some answers were not 200:\n{done.stdout}")
    # -g: one tab-separated line per request (starttime, seconds, ctime, dtime, ttime, wait), ttime in ms.
    rows = times.read_text().splitlines()[1:]
    return [int(line.split("\t")[4]) / 1000 for line in rows]


class Peer:
    """A server this script starts with `argv` on `port` and waits for until `path` answers a zero-second call."""

    def __init__(self, argv: list[str], port: int, path: str, name: str) -> None:
        self.port = port
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_serving(port, path, name)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def bare() -> Peer:
    """A bare Starlette route on uvicorn (bench/http_routes.py's `sleep` child): `sleep <seconds>`, no shell."""
    port = free_port()
    argv = [sys.executable, str(ROOT / "bench" / "http_routes.py"), "--child", "sleep", "--port", str(port)]
    return Peer(argv, port, "/run", "bare Starlette")


def wait_serving(port: int, path: str, name: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            status, *_ = asyncio.run(raw_call(port, "POST", path, b'{"seconds": 0}', JSON))
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{name} did not start")


def webhook(directory: Path) -> Peer:
    """adnanh/webhook with one hook, `sleep`: /bin/sh -c 'sleep "$0"' <seconds>, answered when it ends."""
    hooks = [
        {
            "id": "sleep",
            "execute-command": "/bin/sh",
            "http-methods": ["POST"],
            "include-command-output-in-response": True,
            "pass-arguments-to-command": [
                {"source": "string", "name": "-c"},
                {"source": "string", "name": 'sleep "$0"'},
                {"source": "payload", "name": "seconds"},
            ],
        }
    ]
    (directory / "hooks.json").write_text(json.dumps(hooks))
    port = free_port()
    argv = ["webhook", "-hooks", str(directory / "hooks.json"), "-ip", "127.0.0.1", "-port", str(port)]
    return Peer(argv, port, "/hooks/sleep", "webhook")


def row(label: str, latencies: list[float], verdict: str = "") -> float:
    p99 = pct(latencies, 0.99)
    print(
        f"    {label:<46} p50 {pct(latencies, 0.5):.3f} s  p99 {p99:.3f} s  max {max(latencies):.3f} s  {verdict}",
        flush=True,
    )
    return p99


def by_workers(work: Path, rounds: int, cap: int | None, burst: Any) -> None:
    """The burst's p99 with 1, 2 and CPU-count workers, each beside the no-HTTP floor of as many processes."""
    counts = sorted({1, 2, os.cpu_count() or 1})
    capped = f"max_concurrent_calls {cap}" if cap else "the default max_concurrent_calls"
    print(f"\n200 concurrent `sleep 1` by worker count ({capped}; {os.cpu_count()} CPUs), p99 per round")
    for count in counts:
        settings = {"SVC_LOG_LEVEL": "warning", "SVC_WORKERS": str(count)}
        if cap:
            settings["SVC_MAX_CONCURRENT_CALLS"] = str(cap)
        server = serve_catalog(work, SLEEPERS, settings, name=f"workers-{count}").start()
        try:
            ours, floor = [], []
            for _ in range(rounds):
                ours.append(pct(burst(server.port, "/tools/ops.sleep"), 0.99))
                time.sleep(1)
                floor.append(pct(bare_sleepers(shell=False, processes=count), 0.99))
                time.sleep(1)
        finally:
            server.stop()
        rounds_text = " ".join(f"{p:.3f}" for p in ours)
        print(
            f"    --workers {count:<3} toolrun p99 {statistics.median(ours):.3f} s ({rounds_text})"
            f"   no-HTTP floor, {count} process(es): {statistics.median(floor):.3f} s"
            f"   toolrun over the floor {statistics.median(ours) - statistics.median(floor):+.3f} s",
            flush=True,
        )


async def flood(port: int) -> tuple[dict[int, int], float]:
    stop = asyncio.Event()
    worst = 0.0

    async def probe() -> None:
        nonlocal worst
        while not stop.is_set():
            status, _, _, took = await raw_call(port, "GET", "/healthz")
            assert status == 200
            worst = max(worst, took)
            await asyncio.sleep(0.02)

    prober = asyncio.ensure_future(probe())
    results = await asyncio.gather(
        *(raw_call(port, "POST", "/tools/ops.echo", b'{"msg": "hi"}', JSON) for _ in range(1000))
    )
    stop.set()
    await prober
    counts: dict[int, int] = {}
    for status, *_ in results:
        counts[status] = counts.get(status, 0) + 1
    return counts, worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, help="worker processes (default: the server's default, one per CPU)")
    parser.add_argument("--cap", type=int, help="max_concurrent_calls for the by-worker-count burst (default: 256)")
    parser.add_argument("--only-workers", action="store_true", help="run only the burst by worker count")
    args = parser.parse_args()
    from toolrun.server.workers import default_workers

    workers = args.workers or default_workers()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  ({os.cpu_count()} CPUs)")
    have_ab = shutil.which("ab") is not None
    have_webhook = shutil.which("webhook") is not None
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)

        def burst(port: int, path: str) -> list[float]:
            return ab_sleepers(port, path, work) if have_ab else asyncio.run(sleepers(port, path))

        if args.only_workers:
            by_workers(work, args.rounds, args.cap, burst)
            return
        settings = {"SVC_LOG_LEVEL": "warning"}
        if args.workers is not None:
            settings["SVC_WORKERS"] = str(args.workers)
        server = serve_catalog(work, SLEEPERS, settings, name="server").start()
        hook = webhook(work) if have_webhook else None
        plain = bare()
        try:
            client = "ab" if have_ab else "Python asyncio client"
            print(f"\n200 concurrent calls of `sleep 1`, {client} (target, issue 14: toolrun p99 <= {TARGET_P99} s)")
            if not have_ab:
                print("  (ab is not installed: apt-get install apache2-utils; the asyncio client's figures are higher)")

            rounds: dict[str, list[float]] = {}

            def measure(key: str, label: str, run: Any, verdict: Any = None) -> None:
                latencies = run()
                p99 = row(label, latencies, verdict(pct(latencies, 0.99)) if verdict else "")
                rounds.setdefault(key, []).append(p99)
                time.sleep(1)

            def ok(p99: float) -> str:
                return f"(target <= {TARGET_P99} s: {'ok' if p99 <= TARGET_P99 else 'MISSED'})"

            floor_label = f"bare spawn of sleep 1, {workers} processes"
            for round_ in range(1, args.rounds + 1):
                print(f"  round {round_} (load average {os.getloadavg()[0]:.2f})")
                measure(
                    "toolrun", "toolrun, exec: sleep {{ seconds }}", lambda: burst(server.port, "/tools/ops.sleep"), ok
                )
                if have_ab:
                    measure(
                        "asyncio", "toolrun, Python asyncio client (before)", lambda: asyncio.run(sleepers(server.port))
                    )
                if hook is not None:
                    measure("webhook", "webhook (Go), sh -c 'sleep 1'", lambda: burst(hook.port, "/hooks/sleep"))
                measure("bare", "bare Starlette route, sleep 1 (no shell)", lambda: burst(plain.port, "/run"))
                measure("sh", "bare spawn of sh -c 'sleep 1', 1 process", lambda: bare_sleepers())
                measure("floor1", "bare spawn of sleep 1, 1 process", lambda: bare_sleepers(shell=False))
                if workers > 1:
                    measure("floor", floor_label, lambda: bare_sleepers(shell=False, processes=workers))
            print(f"  p99 over {args.rounds} round(s), median (best):")
            labels = {
                "toolrun": "toolrun",
                "asyncio": "toolrun, Python asyncio client",
                "webhook": "webhook (Go)",
                "bare": "bare Starlette route (Python HTTP, nothing else)",
                "sh": "bare spawn of sh -c 'sleep 1', 1 process",
                "floor1": "bare spawn of sleep 1, 1 process",
                "floor": floor_label,
            }
            for key, values in rounds.items():
                median = statistics.median(values)
                note = (
                    f"  target <= {TARGET_P99} s: {'ok' if median <= TARGET_P99 else 'MISSED'}"
                    if key == "toolrun"
                    else ""
                )
                print(f"    {labels[key]:<50} {median:.3f} s ({min(values):.3f} s){note}")
            ours = statistics.median(rounds["toolrun"])
            others = [
                ("the bare Starlette route", "bare"),
                ("webhook", "webhook"),
                ("the no-HTTP floor", "floor" if workers > 1 else "floor1"),
            ]
            print(
                "    toolrun's median p99 over "
                + ", ".join(
                    f"{name}'s {ours - statistics.median(rounds[key]):+.3f} s" for name, key in others if key in rounds
                )
            )
            counts, worst = asyncio.run(flood(server.port))
            print("\n1,000 concurrent POSTs to an echo tool")
            print(f"  answers: {dict(sorted(counts.items()))}  slowest /healthz meanwhile: {worst * 1000:.0f} ms")
            print(f"  server RSS after: {server.rss_kib() / 1024:.0f} MiB")
            by_workers(work, args.rounds, args.cap, burst)
        finally:
            server.stop()
            plain.stop()
            if hook is not None:
                hook.stop()
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
