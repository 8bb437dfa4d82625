"""Jobs at scale (issue 35, item 7): a real `toolrun serve` whose state file holds 20,000 jobs (a script, not a test).

    .venv/bin/python bench/jobs_scale.py --before /path/to/a/main/worktree   # before and after, same run
    .venv/bin/python bench/jobs_scale.py                                     # this tree only
    .venv/bin/python bench/jobs_scale.py --jobs 5000 --json out.json

For each source tree (`--before`: another checkout, e.g. `git worktree add ../base main`; then this one), in a
fresh TOOLRUN_HOME:

1. fill the state file with `--jobs` jobs through that tree's own job store (so its layout is the tree's): 95%
   finished within the retention, 5% awaiting approval, spread over 50 requesters, each record shaped as
   `Jobs.submit` makes it (parameters, the approver's plan, a result of a few hundred bytes);
2. start `toolrun serve` (the default workers) on that tree (PYTHONPATH=<tree>/src) and measure, sequentially:
   - `GET /healthz` every 20 ms for `--seconds` (the 5 s job sweep runs meanwhile): p50, p99, max;
   - the same while another client polls the anonymous `GET /metrics` back to back (what one stranger can do);
   - `GET /metrics`: p50, p99;
   - `GET /jobs` as an admin (every job visible: the first page; before, the whole list) and as one requester:
     p50, p99, and the size of the answer.

Needs nothing but the test support code (tests/support). Exit status 0. On the shared 2-core machine the
absolute figures move with the load; the before/after ratio of one run is the figure to read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT / "tests"))

from support.catalogs import write_catalog  # noqa: E402
from support.jobs import approval_catalog  # noqa: E402
from support.keys import create_key  # noqa: E402
from support.servers import Processes, ToolrunServer  # noqa: E402

CATALOG = approval_catalog()

# Runs in the measured tree (its PYTHONPATH): the tree's own store writes the jobs.
FILL = r"""
import asyncio, json, sys, time
from toolrun.settings import Settings
from toolrun.state import SharedState

count = int(sys.argv[1])
store = SharedState(Settings.load()).jobs()

def record(i, now):
    user = f"user{i % 50}"
    awaiting = i % 20 == 0
    created = now - 3600 + i * (3000 / count)
    out = f"wiped db{i}\n"
    return {
        "id": f"bench{i:07d}", "tool": "ops.wipe", "state": "awaiting_approval" if awaiting else "succeeded",
        "requester": {"username": user, "email": "", "groups": ["ops"], "anonymous": False,
                      "client": "127.0.0.1", "key_prefix": "trk_abcdefgh", "source": "key", "person": f"user:{user}"},
        "approvers": ["oncall"], "args": {"target": f"db{i}"}, "shown_args": {"target": f"db{i}"},
        "digest": "sha256:" + "0" * 64,
        "plan": {"tool": "ops.wipe", "kind": "exec", "command": f"echo wiped db{i}",
                 "argv": ["echo", "wiped", f"db{i}"], "cwd": None, "timeout": 60.0, "env": {}, "sandbox": "off"},
        "created": created, "updated": created + 5, "expires_at": now + 3600 if awaiting else None,
        "door": "http", "request_id": f"req{i}", "as_json": False,
        "decided_by": None if awaiting else "bob", "decided_at": None if awaiting else created + 3,
        "reason": None, "error": None, "output": None, "runner": None, "heartbeat": None, "cancel": False,
        "started": None if awaiting else created + 3, "finished": None if awaiting else created + 5,
        "result": None if awaiting else {"status": 200, "text": out, "exit_code": 0, "json": {
            "key": "ops.wipe", "ok": True, "returncode": 0, "stdout": out, "stderr": "", "timed_out": False,
            "seconds": 0.004, "result": out, "truncated": False, "bytes_kept": len(out), "bytes_dropped": 0}},
    }

async def go():
    now = time.time()
    for i in range(count):
        await store.create(record(i, now))

asyncio.run(go())
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] * 1000


def timed(client: httpx.Client, url: str, headers: dict[str, str] | None = None) -> tuple[float, int]:
    started = time.perf_counter()
    r = client.get(url, headers=headers or {})
    r.raise_for_status()
    return time.perf_counter() - started, len(r.content)


def poll_healthz(url: str, seconds: float) -> list[float]:
    out: list[float] = []
    with httpx.Client(timeout=60) as client:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            out.append(timed(client, url + "/healthz")[0])
            time.sleep(0.02)
    return out


def hammer(url: str, stop: threading.Event) -> None:
    with httpx.Client(timeout=120) as client:
        while not stop.is_set():
            client.get(url + "/metrics")


def repeat(url: str, n: int, headers: dict[str, str] | None = None, budget: float = 60.0) -> tuple[list[float], int]:
    """`n` sequential GETs, or fewer (at least 5) once `budget` seconds went by."""
    times, size = [], 0
    end = time.monotonic() + budget
    with httpx.Client(timeout=120) as client:
        while len(times) < n and (len(times) < 5 or time.monotonic() < end):
            spent, size = timed(client, url, headers)
            times.append(spent)
    return times, size


def measure(tree: Path, label: str, jobs: int, seconds: float, work: Path) -> dict[str, Any]:
    home = work / label
    env_extra = {"PYTHONPATH": str(tree / "src")}
    catalog = write_catalog(work, CATALOG, f"{label}.yaml")
    with Processes() as procs:
        srv = procs.add(ToolrunServer(home, catalog, env_extra))
        started = time.perf_counter()
        fill = subprocess.run([sys.executable, "-c", FILL, str(jobs)], env=srv.env, capture_output=True, text=True)
        if fill.returncode != 0:
            raise SystemExit(f"{label}: filling the state file failed:\n{fill.stderr[-2000:]}")
        filled = time.perf_counter() - started
        admin = create_key(srv.env, "root", "admin")
        user = create_key(srv.env, "user7", "ops")
        srv.start()
        with httpx.Client(timeout=120) as client:  # warm: the first requests import and open what they need
            client.get(srv.url + "/metrics")
            client.get(srv.url + "/jobs", headers={"X-API-Key": admin})
        row: dict[str, Any] = {"tree": str(tree), "jobs": jobs, "fill_s": round(filled, 1)}
        quiet = poll_healthz(srv.url, seconds)
        row["healthz"] = {"n": len(quiet), "p50": pct(quiet, 50), "p99": pct(quiet, 99), "max": max(quiet) * 1000}
        stop = threading.Event()
        poller = threading.Thread(target=hammer, args=(srv.url, stop), daemon=True)
        poller.start()
        busy = poll_healthz(srv.url, seconds)
        stop.set()
        poller.join()
        row["healthz_metrics_polled"] = {
            "n": len(busy),
            "p50": pct(busy, 50),
            "p99": pct(busy, 99),
            "max": max(busy) * 1000,
        }
        metrics, _ = repeat(srv.url + "/metrics", 30)
        row["metrics"] = {"n": len(metrics), "p50": pct(metrics, 50), "p99": pct(metrics, 99)}
        for name, key in (("jobs_admin", admin), ("jobs_user", user)):
            times, size = repeat(srv.url + "/jobs", 20, {"X-API-Key": key})
            row[name] = {"n": len(times), "p50": pct(times, 50), "p99": pct(times, 99), "bytes": size}
        state = Path(srv.env["TOOLRUN_HOME"]) / "data" / "state.db"
        row["state_db_bytes"] = state.stat().st_size
    return row


def show(rows: list[dict[str, Any]]) -> None:
    print(f"\n{rows[0]['jobs']} jobs in the state file; milliseconds\n")
    heads = ["figure", *(r["label"] for r in rows)]
    lines = [
        ("GET /healthz p50", "healthz", "p50"),
        ("GET /healthz p99", "healthz", "p99"),
        ("GET /healthz max", "healthz", "max"),
        ("GET /healthz p99 while /metrics is polled", "healthz_metrics_polled", "p99"),
        ("GET /healthz max while /metrics is polled", "healthz_metrics_polled", "max"),
        ("GET /metrics p50", "metrics", "p50"),
        ("GET /metrics p99", "metrics", "p99"),
        ("GET /jobs (admin) p50", "jobs_admin", "p50"),
        ("GET /jobs (admin) p99", "jobs_admin", "p99"),
        ("GET /jobs (admin) bytes", "jobs_admin", "bytes"),
        ("GET /jobs (one requester) p50", "jobs_user", "p50"),
        ("GET /jobs (one requester) p99", "jobs_user", "p99"),
    ]
    print(" | ".join(heads))
    print(" | ".join("---" for _ in heads))
    for title, key, field in lines:
        cells = [f"{r[key][field]:,.0f}" if field == "bytes" else f"{r[key][field]:.1f}" for r in rows]
        print(" | ".join([title, *cells]))
    print(" | ".join(["fill (s)", *(str(r["fill_s"]) for r in rows)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with (its src/ is used)")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=12.0, help="each /healthz series (covers 2 sweeps)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    trees = ([("before", args.before.resolve())] if args.before else []) + [("after", ROOT)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="jobs-scale-") as tmp:
        for label, tree in trees:
            print(f"{label}: {tree} ...", flush=True)
            row = measure(tree, label, args.jobs, args.seconds, Path(tmp))
            row["label"] = label
            rows.append(row)
    show(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
