"""Would sending a response's head with its first body chunk (`_CoalescingTransport` below) pay?

    .venv/bin/python bench/coalesce.py                          # about 2 minutes on 2 cores
    .venv/bin/python bench/coalesce.py --duration 1 --rounds 1  # a smoke run

Two `toolrun serve` processes on one catalog, identical but for the coalescing: `off` is toolrun as
shipped (uvicorn writes a response's head and its body in two `send()` system calls); `on` wraps each
connection's transport in `_CoalescingTransport`, which holds a head until the body written right
after it and sends both in one call. toolrun shipped it until this benchmark could not show that it
pays (on a shared 2-core machine: mixed ratios from run to run, more CPU per request at c=1); it
lives here to be measured again on a quiet machine. wrk over loopback at concurrency 1, 8 and 32,
servers interleaved, best of `--rounds`, on the cheapest routes (where a system call weighs most):
POST /tools/bench.ifn_echo (an `inline: true` fn tool) and GET /healthz. Printed: requests/s,
p50/p99 and the server's CPU time per request, and the on/off ratios (throughput and CPU).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

OFF = "import sys\nsys.argv = ['toolrun', *sys.argv[1:]]\nfrom toolrun.cli import main\nmain()\n"
# The `on` server: toolrun serve whose protocol wraps each connection's transport (this file's class).
ON = (
    "import importlib.util, sys\n"
    f"spec = importlib.util.spec_from_file_location('bench_coalesce', {str(Path(__file__).resolve())!r})\n"
    "coalesce = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(coalesce)\n"
    "import toolrun.server.run as run\n"
    "run.http_protocol = coalesce.coalescing(run.http_protocol)\n"
    "sys.argv = ['toolrun', *sys.argv[1:]]\n"
    "from toolrun.cli import main\n"
    "main()\n"
)


def get_script_text(wrk_script: str) -> str:
    return wrk_script.replace('wrk.method = "POST"', 'wrk.method = "GET"').replace("wrk.body = ", "-- wrk.body = ")


class _CoalescingTransport:
    """A connection's transport that sends each response head together with the first body chunk.

    uvicorn writes the head and the body of a response in two `send()` calls; here a head waits for
    the body written right after it (same loop iteration), so a small response is one system call
    (the gain this script measures). A head with nothing after it (100 Continue, a
    streamed response whose body comes later) goes out at the next loop iteration at the latest.
    """

    __slots__ = ("_flush_handle", "_loop", "_pending", "_transport")

    def __init__(self, transport: Any, loop: Any) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: bytes | None = None
        self._flush_handle: Any = None

    def write(self, data: bytes) -> None:
        if self._pending is not None:
            data, self._pending = self._pending + data, None
            self._flush_handle.cancel()
            self._transport.write(data)
        elif data[:5] == b"HTTP/" and data[-4:] == b"\r\n\r\n":
            self._pending = data
            self._flush_handle = self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def _flush(self) -> None:
        if self._pending is not None:
            data, self._pending = self._pending, None
            self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def coalescing(http_protocol: Any) -> Any:
    """`http_protocol` whose protocol class hands uvicorn a `_CoalescingTransport`."""

    def make(head_timeout: float) -> Any:
        base = http_protocol(head_timeout)

        class Coalescing(base):  # type: ignore[misc,valid-type]
            def connection_made(self, transport: Any) -> None:
                super().connection_made(_CoalescingTransport(transport, self.loop))

        return Coalescing

    return make


def main() -> None:
    # http_routes lives next to this file (imported here, not at the top: the `on` server loads this
    # module too, and bench/ on its sys.path would shadow the `mcp` package with bench/mcp.py).
    sys.path.insert(0, str(Path(__file__).resolve().parent))

    from http_routes import (
        CATALOG,
        CONCURRENCY,
        FNS,
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
        get_script.write_text(get_script_text(WRK_SCRIPT))
        env = {**os.environ, "TOOLRUN_HOME": str(home / "home"), "SVC_LOG_LEVEL": "warning"}
        servers = {}
        for name, code in (("on", ON), ("off", OFF)):
            port = free_port()
            argv = [PYTHON, "-c", code, "serve", "-c", str(home / "tools.yaml"), "--port", str(port)]
            servers[name] = stack.enter_context(started(name, argv, env, port))
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
