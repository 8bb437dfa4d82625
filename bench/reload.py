"""Hot-reload benchmark: swap a 10,000-tool catalog under a real `toolrun serve` while calls run.

    .venv/bin/python bench/reload.py               # about a minute on 2 cores
    .venv/bin/python bench/reload.py --tools 2000  # a smaller catalog
    .venv/bin/python bench/reload.py --json out.json

Figures:
  (a) time of `POST /admin/reload` (load with every check + swap) for the generated catalog:
      `changed`: a tool was edited, so the file is parsed and checked again (the catalog cache
      cannot help); `unchanged`: the same bytes, served from the catalog cache;
  (b) calls during reloads: C clients call a small tool in a loop while the catalog is reloaded
      R times; every call must succeed (the figure is the count of failed calls: must be 0), and
      the call latency (p50, p99, max) during the reloads is set against the same load without.

Processes come from tests/support/servers.py (a free loopback port, bounded waits, always
stopped). On a 2-core machine the loader thread and the event loop share the cores with the
client: compare the rows with each other.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT / "tests"))

import httpx  # noqa: E402

from support.catalogs import generate_catalog  # noqa: E402
from support.keys import create_key  # noqa: E402
from support.servers import ToolrunServer  # noqa: E402

PINNED = """\
version: 1
group: bench
tools:
  - name: echo
    public: true
    exec: printf ok
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def load(url: str, clients: int, stop: asyncio.Event) -> tuple[list[float], int, int]:
    """Call bench.echo from `clients` loops until `stop`; (latencies, calls, failures)."""
    latencies: list[float] = []
    failures = 0

    async def one(client: httpx.AsyncClient) -> None:
        nonlocal failures
        while not stop.is_set():
            started = time.perf_counter()
            try:
                answer = await client.post(url + "/tools/bench.echo", json={})
                ok = answer.status_code == 200 and answer.text == "ok"
            except httpx.HTTPError:
                ok = False
            latencies.append(time.perf_counter() - started)
            if not ok:
                failures += 1

    async with httpx.AsyncClient(timeout=60) as client:
        await asyncio.gather(*(one(client) for _ in range(clients)))
    return latencies, len(latencies), failures


async def measure(url: str, admin: str, clients: int, reloads: int, edit: Any) -> dict[str, Any]:
    stop = asyncio.Event()
    # Without reloads: the same load for a fixed time, as the baseline.
    task = asyncio.create_task(load(url, clients, stop))
    await asyncio.sleep(3)
    stop.set()
    base, base_calls, base_failures = await task

    stop = asyncio.Event()
    task = asyncio.create_task(load(url, clients, stop))
    times: list[float] = []
    async with httpx.AsyncClient(timeout=600) as client:
        for i in range(reloads):
            edit(i)
            started = time.perf_counter()
            answer = await client.post(url + "/admin/reload", headers={"X-API-Key": admin})
            times.append(time.perf_counter() - started)
            assert answer.status_code == 200, answer.text
    stop.set()
    during, calls, failures = await task
    return {
        "reload_seconds": times,
        "baseline": {
            "calls": base_calls,
            "failures": base_failures,
            "p50_ms": percentile(base, 0.5) * 1000,
            "p99_ms": percentile(base, 0.99) * 1000,
            "max_ms": max(base) * 1000,
        },
        "during_reloads": {
            "calls": calls,
            "failures": failures,
            "p50_ms": percentile(during, 0.5) * 1000,
            "p99_ms": percentile(during, 0.99) * 1000,
            "max_ms": max(during) * 1000,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--reloads", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        catalog_dir = work / "catalog"
        catalog_dir.mkdir()
        (catalog_dir / "bench.yaml").write_text(PINNED)
        generated = catalog_dir / "generated.yaml"
        text = generate_catalog(args.tools)
        generated.write_text(text)
        server = ToolrunServer(work, catalog_dir, {"SVC_RELOAD_INTERVAL": "0", "SVC_RATE_LIMIT_ENABLED": "false"})
        admin = create_key(server.env, "bench-admin", "admin")
        started = time.perf_counter()
        with server.start(timeout=600):
            cold_start = time.perf_counter() - started
            print(f"catalog: {args.tools} tools + 1, {len(text) / 1e6:.1f} MB; server up in {cold_start:.1f} s")

            def changed(i: int) -> None:  # one description edited: the file parses and checks again
                generated.write_text(text.replace("(generated tool number 0)", f"(generated tool number 0, edit {i})"))

            def unchanged(i: int) -> None:
                generated.write_text(text)

            results = {}
            for name, edit in (("changed", changed), ("unchanged", unchanged)):
                results[name] = asyncio.run(measure(server.url, admin, args.clients, args.reloads, edit))
                r = results[name]
                b, d = r["baseline"], r["during_reloads"]
                print(
                    f"\n{name} catalog: reload (load + checks + swap) "
                    f"median {statistics.median(r['reload_seconds']):.2f} s, "
                    f"runs {', '.join(f'{t:.2f}' for t in r['reload_seconds'])} s"
                )
                print(f"  {'':16} {'calls':>7} {'failed':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
                for label, row in (("no reload", b), ("during reloads", d)):
                    print(
                        f"  {label:16} {row['calls']:>7} {row['failures']:>7} {row['p50_ms']:>8.1f} "
                        f"{row['p99_ms']:>8.1f} {row['max_ms']:>8.1f}"
                    )
            rss = server.rss_kib()
            print(f"\nserver RSS after the reloads: {rss / 1024:.0f} MiB")
            results["rss_kib"] = rss  # type: ignore[assignment]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    failed = sum(results[n]["during_reloads"]["failures"] for n in ("changed", "unchanged"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
