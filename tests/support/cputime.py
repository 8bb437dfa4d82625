"""A pytest plugin that records the CPU each test costs (user + sys, of pytest itself and of the children it waited
for: servers, the CLI, redis-server, Chromium's driver), to find where the suite's time goes on a shared machine
where wall time says little.

    TOOLRUN_CPU_LOG=/tmp/cpu.jsonl .venv/bin/pytest tests/test_x.py   # tests/conftest.py imports the hook
    python tests/support/cputime.py /tmp/cpu.jsonl      # the totals per file, the heaviest tests

One JSON line per test: its node id, wall seconds and CPU seconds (setup, call and teardown together, so a
module-scoped fixture counts in the test that starts it and the one that stops it). A child counts once it has
been reaped: a process left running (or reparented to init) is not counted.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path

import pytest


def _cpu() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    log = os.environ.get("TOOLRUN_CPU_LOG")
    if not log:
        yield
        return
    cpu, wall = _cpu(), time.monotonic()
    yield
    line = {"test": item.nodeid, "cpu": round(_cpu() - cpu, 3), "wall": round(time.monotonic() - wall, 3)}
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def report(path: Path, top: int = 25) -> str:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for row in rows:
        name = row["test"].split("::")[0] + (" (speedups off)" if "::speedups-off::" in row["test"] else "")
        files[name][0] += row["cpu"]
        files[name][1] += row["wall"]
        files[name][2] += 1
    out = [f"{'cpu s':>8} {'wall s':>8} {'tests':>5}  file"]
    for name, (cpu, wall, n) in sorted(files.items(), key=lambda kv: -kv[1][0]):
        out.append(f"{cpu:8.1f} {wall:8.1f} {int(n):5d}  {name}")
    cpu, wall = sum(v[0] for v in files.values()), sum(v[1] for v in files.values())
    out.append(f"{cpu:8.1f} {wall:8.1f} {len(rows):5d}  total")
    out.append("")
    for row in sorted(rows, key=lambda r: -r["cpu"])[:top]:
        out.append(f"{row['cpu']:8.1f} {row['wall']:8.1f}  {row['test']}")
    return "\n".join(out)


if __name__ == "__main__":
    print(report(Path(sys.argv[1])))
