"""Scale-out benchmark: one replica vs two replicas behind nginx sharing Redis (a script, not a test).

    .venv/bin/python bench/scale.py              # about a minute and a half on 2 cores
    .venv/bin/python bench/scale.py --quick      # shorter wrk runs and fewer limiter hits
    .venv/bin/python bench/scale.py --json out.json

Two figures (issue 6):
  (a) echo-tool throughput and latency (p50, p99) with wrk at concurrency 32: authenticated
      POST /tools/bench.echo with a JSON body, rate limiting on (with a limit no run reaches,
      so every call pays for the limiter decision), for
        1. one replica, embedded state (SQLite keys, in-memory limiter), wrk straight to it
        2. one replica with SVC_REDIS_URL (keys and limiter in Redis), wrk straight to it
        3. the same replica behind nginx (the proxy's own cost)
        4. two replicas with SVC_REDIS_URL behind nginx (upstream with both, keepalive)
  (b) the rate-limit decision cost: microseconds per `hit()` of MemoryLimiter and RedisLimiter,
      a sequential in-process loop (5,000 hits) against the same redis-server.

Processes come from tests/support/servers.py (free loopback ports, bounded waits, always
stopped). Needs redis-server, nginx and wrk (Debian packages). Exit status 0 unless a tool is
missing. On a 2-core machine wrk, nginx, Redis and the replicas share the two cores: compare
rows with each other, not with a bigger machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
# bench/ holds http.py and mcp.py: drop it from the path so they do not shadow the real packages
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT / "tests"))

from support.keys import create_key  # noqa: E402
from support.servers import Nginx, Processes, RedisServer, ToolrunServer, start_all  # noqa: E402

CATALOG = """\
version: 1
group: bench
tools:
  - name: echo
    description: Print a message back.
    groups: [bench]
    exec: printf '%s' {{ msg | quote }}
    params:
      - name: msg
        type: str
"""

WRK_SCRIPT = """\
wrk.method = "POST"
wrk.body = '{"msg": "hi"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-API-Key"] = "%s"
"""

# -- (a) wrk ------------------------------------------------------------------------------------

_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def _seconds(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if not match:
        raise ValueError(text)
    return float(match.group(1)) * _UNITS[match.group(2)]


def wrk(url: str, script: Path, seconds: int, connections: int = 32) -> dict[str, Any]:
    binary = shutil.which("wrk") or "wrk"
    argv = [binary, "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30, check=True).stdout
    result: dict[str, Any] = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))}  # type: ignore[union-attr]
    for pct in ("50", "99"):
        result[f"p{pct}"] = _seconds(re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    total = re.search(r"(\d+) requests in", out)
    result["requests"] = int(total.group(1)) if total else 0
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    result["non_2xx"] = int(bad.group(1)) if bad else 0
    errors = re.search(r"Socket errors: (.*)", out)
    result["socket_errors"] = errors.group(1) if errors else ""
    return result


def run_http(args: argparse.Namespace, base: Path) -> list[dict[str, Any]]:
    catalog = base / "catalog" / "bench.yaml"
    catalog.parent.mkdir()
    catalog.write_text(CATALOG, encoding="utf-8")
    rows: list[dict[str, Any]] = []
    limits = {"SVC_RATE_LIMIT_ENABLED": True, "SVC_RATE_LIMIT_CALLS": 1_000_000_000, "SVC_LOG_LEVEL": "warning"}

    def measure(label: str, url: str, key: str, replicas: list[ToolrunServer]) -> None:
        script = base / f"wrk-{len(rows)}.lua"
        script.write_text(WRK_SCRIPT % key, encoding="utf-8")
        wrk(url + "/tools/bench.echo", script, args.warmup)  # warm: connections, caches
        figures = wrk(url + "/tools/bench.echo", script, args.seconds)
        figures["label"] = label
        figures["rss_mib"] = [round(r.rss_kib() / 1024, 1) for r in replicas]
        rows.append(figures)
        print(f"  {label}: {figures['rps']:.0f} req/s, p99 {figures['p99'] * 1000:.1f} ms", flush=True)

    with Processes() as procs:
        redis = procs.add(RedisServer(base / "redis").start())
        embedded = procs.add(ToolrunServer(base / "embedded", catalog, limits))
        shared = {**limits, "SVC_REDIS_URL": redis.url}
        one = procs.add(ToolrunServer(base / "one", catalog, shared))
        two = procs.add(ToolrunServer(base / "two", catalog, shared))
        start_all(embedded, one, two)
        local_key = create_key(embedded.env, "bench", "bench")
        redis_key = create_key(one.env, "bench", "bench")

        measure("1 replica, embedded (SQLite + memory)", embedded.url, local_key, [embedded])
        embedded.stop()  # leave its CPU to the others
        measure("1 replica, Redis", one.url, redis_key, [one])
        proxy_one = procs.add(Nginx(base / "nginx-one", [one.port]).start())
        measure("1 replica, Redis, behind nginx", proxy_one.url, redis_key, [one])
        proxy_one.stop()
        proxy_two = procs.add(Nginx(base / "nginx-two", [one.port, two.port]).start())
        measure("2 replicas, Redis, behind nginx", proxy_two.url, redis_key, [one, two])
    return rows


# -- (b) the limiter decision ---------------------------------------------------------------------


def run_limiters(args: argparse.Namespace, base: Path) -> list[dict[str, Any]]:
    from toolrun.state.memory import MemoryLimiter
    from toolrun.state.redis import RedisKeyStore, RedisLimiter

    async def loop(limiter: Any, n: int) -> list[float]:
        for i in range(200):  # warm-up (connection, script load)
            await limiter.hit("user:warm", f"t{i % 4}")
        times = []
        for i in range(n):
            started = time.perf_counter()
            await limiter.hit("user:bench", f"tool{i % 8}")
            times.append(time.perf_counter() - started)
        return times

    rows = []
    with Processes() as procs:
        redis = procs.add(RedisServer(base / "redis-limiter").start())
        store = RedisKeyStore(redis.url)

        async def both() -> dict[str, list[float]]:
            memory = await loop(MemoryLimiter(1_000_000_000, 60), args.hits)
            shared = await loop(RedisLimiter(store, 1_000_000_000, 60), args.hits)
            await store.aio().aclose()
            return {"MemoryLimiter": memory, "RedisLimiter": shared}

        for name, times in asyncio.run(both()).items():
            micro = sorted(t * 1e6 for t in times)
            rows.append(
                {
                    "limiter": name,
                    "hits": len(micro),
                    "mean_us": statistics.fmean(micro),
                    "p50_us": micro[len(micro) // 2],
                    "p99_us": micro[int(len(micro) * 0.99)],
                }
            )
    return rows


# -- main -----------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 s wrk runs, 1,000 limiter hits")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args(argv)
    args.seconds, args.warmup, args.hits = (3, 1, 1000) if args.quick else (10, 2, 5000)
    missing = [b for b in ("redis-server", "nginx", "wrk") if not (shutil.which(b) or Path(f"/usr/sbin/{b}").exists())]
    if missing:
        print(f"missing: {', '.join(missing)} (apt-get install redis-server nginx wrk)", file=sys.stderr)
        return 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="toolrun-scale-") as tmp:
        base = Path(tmp)
        print(f"(a) echo tool, wrk -t2 -c32 -d{args.seconds}s, authenticated POST, rate limiting on")
        http_rows = run_http(args, base)
        print(f"(b) rate-limit decision, {args.hits} sequential hit() calls in-process")
        limiter_rows = run_limiters(args, base)

    print()
    print(f"| setup (wrk -c32, {args.seconds} s) | req/s | p50 | p99 | non-2xx | RSS per replica |")
    print("|---|---|---|---|---|---|")
    for row in http_rows:
        rss = " + ".join(f"{m:.0f} MiB" for m in row["rss_mib"])
        print(
            f"| {row['label']} | {row['rps']:,.0f} | {row['p50'] * 1000:.1f} ms | {row['p99'] * 1000:.1f} ms "
            f"| {row['non_2xx']} | {rss} |"
        )
    print()
    print("| limiter | hits | mean | p50 | p99 |")
    print("|---|---|---|---|---|")
    for row in limiter_rows:
        print(
            f"| {row['limiter']} | {row['hits']:,} | {row['mean_us']:.1f} µs | {row['p50_us']:.1f} µs "
            f"| {row['p99_us']:.1f} µs |"
        )
    print(f"\n({time.monotonic() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"http": http_rows, "limiter": limiter_rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
