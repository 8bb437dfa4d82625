"""Memory of `toolrun serve` with its default workers, after load (a script, not a test).

    .venv/bin/python bench/workers.py            # the example catalog and a generated 10,000-tool catalog
    .venv/bin/python bench/workers.py --tools 2000

For each catalog: start `toolrun serve` (default workers: one per CPU), drive it (200 echo calls over
new connections, so every worker serves some; anonymous GET /tools and /search on each), then read each
process's resident memory from /proc: RSS (what the issue's targets count; pages shared with the
parent and the other workers count in full in each), PSS (shared pages divided among their users)
and USS (the process's own). Then an admin lists and searches the whole catalog on every worker (each
worker encodes every tool's entry and builds the search index of the whole catalog: the most a
worker holds for a catalog) and the figures are read again. Targets (issue 14): RSS per worker under
80 MB with the example catalog, under 150 MB with 10,000 tools. Prints and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT / "tests"))

from support.catalogs import generate_catalog  # noqa: E402
from support.http import raw_call  # noqa: E402
from support.keys import create_key  # noqa: E402
from support.servers import ToolrunServer  # noqa: E402

ECHO = """\
version: 1
group: bench
tools:
  - name: echo
    public: true
    description: Print the message.
    exec: printf '%s' {{ msg | quote }}
    params:
      - name: msg
        type: str
"""


def memory(pid: int) -> dict[str, float]:
    """RSS, PSS and USS of one process in MB (smaps_rollup)."""
    values = {"rss": 0.0, "pss": 0.0, "uss": 0.0}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, _, rest = line.partition(":")
            kb = float(rest.split()[0]) if rest.split() else 0.0
            if name == "Rss":
                values["rss"] = kb / 1024
            elif name == "Pss":
                values["pss"] = kb / 1024
            elif name in ("Private_Clean", "Private_Dirty"):
                values["uss"] += kb / 1024
    except OSError:
        pass
    return values


def workers_of(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


async def drive(port: int, tool: str) -> None:
    body = b'{"msg": "hi"}'
    headers = {"content-type": "application/json"}
    for _ in range(4):
        await asyncio.gather(*(raw_call(port, "POST", f"/tools/{tool}", body, headers) for _ in range(50)))
    for _ in range(8):
        await raw_call(port, "GET", "/tools")
        await raw_call(port, "GET", "/search?q=disk")


async def drive_admin(port: int, key: str) -> None:
    """Every worker (connections are spread over them) lists and searches the whole catalog."""
    headers = {"authorization": f"Bearer {key}"}
    for path in ("/tools", "/search?q=disk", "/search?q=chek+dsik", "/search?q=list+the+hosts"):
        for _ in range(4):
            await asyncio.gather(*(raw_call(port, "GET", path, b"", headers) for _ in range(4)))


def table(label: str, parent: dict[str, float], children: list[dict[str, float]], target: float) -> None:
    print(f"\n{label}: {len(children)} workers")
    print(f"  {'process':<12}{'RSS MB':>10}{'PSS MB':>10}{'USS MB':>10}")
    print(f"  {'supervisor':<12}{parent['rss']:>10.1f}{parent['pss']:>10.1f}{parent['uss']:>10.1f}")
    for m in children:
        print(f"  {'worker':<12}{m['rss']:>10.1f}{m['pss']:>10.1f}{m['uss']:>10.1f}")
    worst = max((m["rss"] for m in children), default=parent["rss"])
    total = parent["pss"] + sum(m["pss"] for m in children)
    verdict = "ok" if worst < target else "MISSED"
    print(f"  largest worker RSS {worst:.1f} MB (target < {target:.0f} MB: {verdict}); whole server PSS {total:.1f} MB")


def measure(label: str, catalog: Path, work: Path, target: float) -> None:
    server = ToolrunServer(work / label.replace(" ", "_"), catalog, {"SVC_LOG_LEVEL": "warning"})
    admin = create_key(server.env, "bench-admin", "admin")
    with server:
        server.start(timeout=300)
        asyncio.run(drive(server.port, "bench.echo"))
        table(label, memory(server.pid), [memory(pid) for pid in workers_of(server.pid)], target)
        asyncio.run(drive_admin(server.port, admin))
        table(
            f"{label}, after an admin listed and searched it all on every worker",
            memory(server.pid),
            [memory(pid) for pid in workers_of(server.pid)],
            target,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tools", type=int, default=10_000, help="size of the generated catalog (default 10000)")
    args = parser.parse_args()
    print(f"load average before: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}  ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="toolrun-bench-workers-") as tmp:
        work = Path(tmp)
        examples = work / "examples"
        examples.mkdir()
        for path in (ROOT / "examples").iterdir():
            if path.suffix in (".yaml", ".yml", ".py"):
                (examples / path.name).write_text(path.read_text())
        (examples / "zz_bench.yaml").write_text(ECHO)
        measure("example catalog", examples, work, 80)
        big = work / "big"
        big.mkdir()
        (big / "tools.yaml").write_text(generate_catalog(args.tools))
        (big / "zz_bench.yaml").write_text(ECHO)
        measure(f"{args.tools:,}-tool catalog", big, work, 150)
    print(f"\nload average after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


if __name__ == "__main__":
    main()
