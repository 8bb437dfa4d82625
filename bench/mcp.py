"""MCP latency: `execute` of a trivial fn tool over each transport, beside `POST /tools/{key}`.

    .venv/bin/python bench/mcp.py              # 300 timed calls per row after 30 warm-up calls
    .venv/bin/python bench/mcp.py --calls 1000
    .venv/bin/python bench/mcp.py --sdk        # /mcp served by the SDK alone (the fast path off)

Rows (all call `pub.ping`, an fn tool returning "pong", from tests/fixtures/mcp_tools.yaml):
  - in-process ToolService.call (no transport: the floor every door pays)
  - MCP over stdio, SDK client, 2026-07-28 and handshake era (a real `toolrun serve --stdio`)
  - MCP over streamable HTTP at /mcp, SDK client, 2026-07-28 and handshake era (a real
    `toolrun serve` on loopback)
  - /mcp again, the SDK client's request bytes sent with httpx (what the server costs, without the
    SDK client's own work), both eras
  - POST /tools/pub.ping on the same server, httpx with keep-alive (the baseline)

Calls are sequential (one in flight), each timed on its own, all from one asyncio loop; the rows
are interleaved (round-robin slices) so a load that drifts during the run hits them alike. The
table gives the median, p90 and min in milliseconds and the median's ratio to POST /tools/{key},
and for the rows served by `toolrun serve` over HTTP, the server's own CPU time per call (its
processes' scheduler time, in nanoseconds from /proc, summed over each row's slices) and its ratio
to POST /tools/{key}: what a call costs the server, which other load on the machine moves far less
than latency; then each /mcp era's ratios against the target (within 1.3x of POST /tools/{key}). The HTTP rows
authenticate with an API key (X-API-Key), like a real client. The /mcp rows are answered by the
fast path in front of the SDK (server/mcp/fast.py); `--sdk` starts the server with it off
(TOOLRUN_SPEEDUPS=mcp_fast_path), to compare. A script, not a test: it prints and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# This file is named mcp.py: keep its directory off the path, or it would shadow the `mcp` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT / "tests"))

import httpx  # noqa: E402

from support.keys import mint_key  # noqa: E402
from support.mcp import CATALOG, ServeProcess, mcp_http, mcp_stdio  # noqa: E402

KEY = "pub.ping"
ARGS = {"key": KEY}


def server_cpu_ns(pid: int) -> int:
    """CPU time (ns) of the server process and its workers so far: every thread's scheduler time from /proc."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            pids += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    total = 0
    for one in pids:
        for task in Path(f"/proc/{one}/task").glob("*"):
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total


def summary(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.9)] * 1000, ordered[0] * 1000


Call = Callable[[], Awaitable[None]]


def mcp_call(client: Any) -> Call:
    async def one() -> None:
        result = await client.call_tool("execute", ARGS)
        assert not result.is_error and result.content[0].text == "pong", result

    return one


def in_process_call(home: Path) -> Call:
    from toolrun.models import Identity
    from toolrun.service import ToolService
    from toolrun.settings import Settings
    from toolrun.state.memory import MemorySessions

    service = ToolService.from_paths(
        [str(CATALOG)], Settings.load(environ={"TOOLRUN_HOME": str(home)}), sessions=MemorySessions()
    )
    identity = Identity("bench", groups=frozenset({"admin"}), anonymous=False)

    async def one() -> None:
        result = await service.call(identity, KEY, {})
        assert result.value == "pong"

    return one


def post_call(http: httpx.AsyncClient) -> Call:
    async def one() -> None:
        response = await http.post(f"/tools/{KEY}")
        assert response.text == "pong", response.text

    return one


RAW_MODERN = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {
        "name": "execute",
        "arguments": ARGS,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def raw_mcp_call(http: httpx.AsyncClient, mode: str) -> Call:
    """The bytes the SDK client sends for `execute`, posted with httpx (the server's share without the SDK client)."""
    if mode == "modern":
        headers = {
            **MCP_HEADERS,
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "execute",
        }
        body = json.dumps(RAW_MODERN, separators=(",", ":")).encode()
    else:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "mcp", "version": "0.1.0"}}
        opened = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        headers = {
            **MCP_HEADERS,
            "MCP-Protocol-Version": "2025-11-25",
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
        }
        params = {"name": "execute", "arguments": ARGS}
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}, separators=(",", ":")
        ).encode()

    async def one() -> None:
        response = await http.post("/mcp", content=body, headers=headers)
        assert response.status_code == 200 and b'"text":"pong"' in response.content, response.text

    return one


async def measure(
    tmp: Path, calls: int, warmup: int, rounds: int, sdk: bool = False
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Open every client at once, then time the rows round-robin (`rounds` slices each), so a
    machine whose load drifts during the run penalises every row alike."""
    home = tmp / "home"
    key = mint_key(home, "bench", ["admin"])
    headers = {"X-API-Key": key}
    env = {"TOOLRUN_SPEEDUPS": "mcp_fast_path"} if sdk else {}
    with ServeProcess(home, tmp / "serve.log", ["--log-level", "warning"], env) as server:
        async with AsyncExitStack() as stack:
            errlog = stack.enter_context((tmp / "stdio.log").open("a"))
            http = await stack.enter_async_context(
                httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60)
            )
            rows: dict[str, Call] = {
                "in-process ToolService.call": in_process_call(home),
                "MCP stdio, 2026-07-28": mcp_call(
                    await stack.enter_async_context(mcp_stdio(home, errlog=errlog, mode="2026-07-28"))
                ),
                "MCP stdio, handshake era": mcp_call(
                    await stack.enter_async_context(mcp_stdio(home, errlog=errlog, mode="legacy"))
                ),
                "MCP HTTP /mcp, 2026-07-28": mcp_call(
                    await stack.enter_async_context(mcp_http(server.mcp_url, "2026-07-28", headers))
                ),
                "MCP HTTP /mcp, handshake era": mcp_call(
                    await stack.enter_async_context(mcp_http(server.mcp_url, "legacy", headers))
                ),
                RAW_ROWS[0]: await raw_mcp_call(http, "modern"),
                RAW_ROWS[1]: await raw_mcp_call(http, "handshake"),
                BASELINE: post_call(http),
            }
            for call in rows.values():
                for _ in range(warmup):
                    await call()
            samples: dict[str, list[float]] = {name: [] for name in rows}
            cpu_ns = dict.fromkeys(SERVED_ROWS, 0)
            assert server.process is not None
            pid = server.process.pid
            per_round = max(1, calls // rounds)
            while any(len(s) < calls for s in samples.values()):
                for name, call in rows.items():
                    before = server_cpu_ns(pid) if name in cpu_ns else 0
                    for _ in range(min(per_round, calls - len(samples[name]))):
                        started = time.perf_counter()
                        await call()
                        samples[name].append(time.perf_counter() - started)
                    if name in cpu_ns:
                        cpu_ns[name] += server_cpu_ns(pid) - before
            return samples, {name: ns / len(samples[name]) / 1000 for name, ns in cpu_ns.items()}


BASELINE = "POST /tools/{key} (httpx keep-alive)"
HTTP_ROWS = ("MCP HTTP /mcp, 2026-07-28", "MCP HTTP /mcp, handshake era")
RAW_ROWS = ("/mcp, same bytes by httpx, 2026-07-28", "/mcp, same bytes by httpx, handshake")
TARGET = 1.3  # issue 14: `execute` through /mcp within 1.3x of POST /tools/{key}, in both eras
SERVED_ROWS = (*HTTP_ROWS, *RAW_ROWS, BASELINE)  # the rows `toolrun serve` answers over HTTP (its CPU is measured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="timed calls per row (default 300)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed calls first (default 30)")
    parser.add_argument("--rounds", type=int, default=10, help="round-robin slices per row (default 10)")
    parser.add_argument("--sdk", action="store_true", help="serve /mcp by the SDK alone (the fast path off)")
    opts = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="toolrun-bench-mcp-") as tmp:
        rows, cpu_us = asyncio.run(measure(Path(tmp), opts.calls, opts.warmup, opts.rounds, opts.sdk))

    baseline = statistics.median(rows[BASELINE]) * 1000
    print(
        f"execute of {KEY} (fn tool returning 'pong'): {opts.calls} sequential calls per row after "
        f"{opts.warmup} warm-up, rows interleaved in {opts.rounds} rounds; load average "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
        + f" on {os.cpu_count()} CPUs"
        + ("; /mcp by the SDK alone (fast path off)" if opts.sdk else "")
    )
    print()
    base_cpu = cpu_us[BASELINE]
    print(
        f"| {'transport':<40} | {'median ms':>9} | {'p90 ms':>7} | {'min ms':>7} | {'calls/s':>7} |"
        f" {'vs POST /tools':>14} | {'server CPU us/call':>18} | {'vs POST /tools':>14} |"
    )
    print(f"|{'-' * 42}|{'-' * 10}:|{'-' * 8}:|{'-' * 8}:|{'-' * 8}:|{'-' * 15}:|{'-' * 19}:|{'-' * 15}:|")
    for name, samples in rows.items():
        median, p90, low = summary(samples)
        cpu = f"{cpu_us[name]:>18.0f} | {cpu_us[name] / base_cpu:>13.2f}x" if name in cpu_us else f"{'':>18} | {'':>14}"
        print(
            f"| {name:<40} | {median:>9.2f} | {p90:>7.2f} | {low:>7.2f} | {1000 / median:>7.0f} |"
            f" {median / baseline:>13.2f}x | {cpu} |"
        )
    print()
    for era, raw in zip(HTTP_ROWS, RAW_ROWS, strict=True):
        ratio = statistics.median(rows[era]) * 1000 / baseline
        server_share = statistics.median(rows[raw]) * 1000 / baseline
        cpu_ratio = cpu_us[era] / base_cpu
        verdict = "meets" if ratio <= TARGET else "MISSES"
        print(
            f"{era}: {ratio:.2f}x POST /tools/{{key}} in latency ({verdict} the {TARGET}x target); "
            f"the same request sent by httpx: {server_share:.2f}x; server CPU per call: {cpu_ratio:.2f}x"
        )


if __name__ == "__main__":
    main()
