"""What does sending a response's head and body in one `send()` save? (`server/protocol.py`'s `CoalescingTransport`)

    .venv/bin/python bench/coalesce.py                          # about 2 minutes on 2 cores
    .venv/bin/python bench/coalesce.py --duration 1 --rounds 1  # a smoke run

Two `toolrun serve` processes on one catalog, identical but for the coalescing: `on` is toolrun as
shipped (the writes of one loop iteration go out in one `send()`: a small response's head and body in
one system call and one TCP segment); `off` runs with `TOOLRUN_SPEEDUPS=coalesce` (the `coalesce` speedup
off), so uvicorn's two writes are two `send()` calls, as uvicorn ships. wrk over loopback at concurrency 1, 8 and 32,
servers interleaved, best of `--rounds`, on the cheapest routes (where a system call weighs most):
POST /tools/bench.ifn_echo (an `inline: true` fn tool) and GET /healthz. Printed: requests/s, p50/p99
and the server's CPU time per request, and the on/off ratios (throughput and CPU). The CPU ratio is the
figure to read on a shared machine: other load moves throughput far more than CPU per request.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

SPEEDUPS = {"on": "on", "off": "coalesce"}  # TOOLRUN_SPEEDUPS of each server


def main() -> None:
    # http_routes lives next to this file (imported here, not at the top: bench/ on sys.path shadows the
    # `mcp` package with bench/mcp.py for anything imported after it).
    sys.path.insert(0, str(Path(__file__).resolve().parent))

    from http_routes import (
        CATALOG,
        CONCURRENCY,
        FNS,
        GET_SCRIPT,
        PYTHON,
        WRK_SCRIPT,
        Target,
        free_port,
        measure,
        started,
        wait_until_serving,
    )

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per wrk run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best counts")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="toolrun-coalesce-") as tmp, ExitStack() as stack:
        home = Path(tmp)
        (home / "tools.yaml").write_text(CATALOG)
        (home / "bench_fns.py").write_text(FNS)
        post_script, get_script = home / "post.lua", home / "get.lua"
        post_script.write_text(WRK_SCRIPT)
        get_script.write_text(GET_SCRIPT)
        env = {**os.environ, "TOOLRUN_HOME": str(home / "home"), "SVC_LOG_LEVEL": "warning"}
        servers = {}
        for name, speedups in SPEEDUPS.items():
            port = free_port()
            argv = [PYTHON, "-m", "toolrun", "serve", "-c", str(home / "tools.yaml"), "--port", str(port)]
            servers[name] = stack.enter_context(started(name, argv, {**env, "TOOLRUN_SPEEDUPS": speedups}, port))
            wait_until_serving(servers[name], "/tools/bench.ifn_echo", "hi")
        results = {}
        for route, path, script in (
            ("POST inline fn", "/tools/bench.ifn_echo", post_script),
            ("GET /healthz", "/healthz", get_script),
        ):
            print(f"\n{route}")
            targets = [Target(servers[n], path, f"coalescing {n}") for n in ("on", "off")]
            measure(targets, args.duration, args.rounds, script)
            results[route] = targets
    print(f"\nload average after: {os.getloadavg()}")
    print("\non/off ratios (throughput: >1 means coalescing is faster; CPU per request: <1 means it is cheaper)")
    for route, (on, off) in results.items():
        cells = "  ".join(
            f"c={c}: {on.results[c]['rps'] / off.results[c]['rps']:.2f}x rps, "
            f"{on.results[c]['cpu_us'] / max(off.results[c]['cpu_us'], 1e-9):.2f}x cpu"
            for c in CONCURRENCY
        )
        print(f"  {route:<16} {cells}")


if __name__ == "__main__":
    main()
