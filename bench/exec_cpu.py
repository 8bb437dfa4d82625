"""The exec route's standing guard (`make bench-exec`): throughput beside webhook, and the server's CPU per call.

    .venv/bin/python bench/exec_cpu.py                        # about 1.5 minutes on 2 cores
    .venv/bin/python bench/exec_cpu.py --before /tmp/exec-old # also an older checkout (its src/), alternated
    .venv/bin/python bench/exec_cpu.py --profile out.txt      # then py-spy a c=8 run (py-spy must be installed)

In one run, with wrk over loopback at concurrency 1, 8 and 32 (POST {"msg": "hi"}, JSON): `toolrun serve`
(default workers, access log on, to a file) on `exec: printf '%s' {{ msg | quote }}` against adnanh/webhook
running the same `sh -c` command (and, with `--before DIR`, the same toolrun server from another checkout),
the servers alternated round by round, the best round of each counting.

The main figure is the server's CPU per call: the user + system time of all its processes (the supervisor and
every worker, from /proc/<pid>/stat; the tool processes it starts are not counted) over the calls of the c=8
rounds, divided by their number. It moves far less with other load than requests per second do (time stolen
by other processes is not the server's), so it is what to compare between commits on a shared machine. It is
printed beside the figure of the last release (RELEASE below: measured with this script on that commit, with
its date and machine); `--before` measures an older checkout in the same run instead.

Run it before resolving any change to the exec path or the server (README, Development). It always exits 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from http_routes import (  # a sibling script, not a package
    CATALOG,
    CONCURRENCY,
    FNS,
    PYTHON,
    WRK_SCRIPT,
    Server,
    Target,
    free_port,
    loadavg,
    run_wrk,
    started,
    wait_until_serving,
    webhook_hooks,
)

# The last release: its commit, the server CPU per call at c=8 (us) and exec/webhook at c=1/8/32, measured with this
# script's `--before` on that commit, and when and where.
RELEASE_COMMIT = "e21bbe8"
RELEASE_CPU_US = 591.0
RELEASE_RATIOS = (0.28, 0.38, 0.64)
RELEASE_MEASURED = "on 2026-11-28, the shared 2-CPU VM at load average 11-12 (its req/s ratios are that load's)"
GOALS = (0.95, 1.1, 1.1)  # issue 40: exec/webhook at c=1, 8, 32
SRC = Path(__file__).resolve().parent.parent / "src"


def toolrun_server(stack: ExitStack, name: str, src: Path, catalog: Path, env: dict[str, str], log: Path) -> Server:
    """`toolrun serve` (default workers) of the checkout whose sources are `src`."""
    port = free_port()
    env = {**env, "PYTHONPATH": str(src)}
    argv = [PYTHON, "-m", "toolrun", "serve", "-c", str(catalog), "--port", str(port)]
    err = stack.enter_context(log.open("wb"))
    return stack.enter_context(started(name, argv, env, port, stderr=err))


def measure(targets: list[Target], seconds: float, rounds: int, script: Path) -> dict[str, dict[int, float]]:
    """Each concurrency in turn, the servers alternated, `rounds` times: the best req/s of each counts; the CPU per
    call is summed over every round (CPU seconds / calls)."""
    cpu: dict[str, dict[int, list[float]]] = {t.label: {c: [0.0, 0.0] for c in CONCURRENCY} for t in targets}
    for target in targets:
        run_wrk(target.url, 8, 1, script)  # warm-up
    for c in CONCURRENCY:
        for _ in range(rounds):
            for target in targets:
                result = run_wrk(target.url, c, seconds, script, target.server)
                calls = result["requests"]  # wrk's own count, not req/s times the nominal duration
                cpu[target.label][c][0] += result["cpu_us"] * calls
                cpu[target.label][c][1] += calls
                best = target.results.get(c)
                if best is None or result["rps"] > best["rps"]:
                    target.results[c] = result
                if result["errors"] or result["non2xx"]:
                    print(f"  {target.label} c={c}: errors={result['errors']:.0f} non2xx={result['non2xx']:.0f}")
    return {label: {c: total / max(1.0, n) for c, (total, n) in by_c.items()} for label, by_c in cpu.items()}


def profile(server: Server, url: str, script: Path, out: Path) -> None:
    """py-spy the server's processes during a c=8 wrk run of 8 seconds; the top functions by own time."""
    spy = shutil.which("py-spy") or str(Path(PYTHON).parent / "py-spy")
    if not Path(spy).exists():
        print("  (py-spy is not installed: no profile)")
        return
    record = [spy, "record", "--nonblocking", "-r", "400", "-d", "8", "-f", "raw", "-o", str(out)]
    spies = [subprocess.Popen([*record[:-1], f"{out}.{pid}", "-p", str(pid)]) for pid in server.pids()[1:]]
    time.sleep(0.5)
    run_wrk(url, 8, 8, script)
    for spy_process in spies:
        spy_process.wait()
    print(f"  profile of {server.name}: {out}.<pid> (collapsed stacks; own time per frame: bench/README.md)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per wrk run (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (default 3)")
    parser.add_argument("--before", type=Path, help="also measure this checkout (its src/), alternated")
    parser.add_argument("--profile", type=Path, help="py-spy a c=8 run of this tree into this file prefix")
    args = parser.parse_args()
    for binary in ("wrk", "webhook"):
        if shutil.which(binary) is None:
            raise SystemExit(f"{binary} is not installed (apt-get install {binary})")
    began = time.monotonic()
    print(f"load average before: {loadavg()}  ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="toolrun-bench-exec-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        (work / "bench_fns.py").write_text(FNS)
        catalog = work / "tools.yaml"
        catalog.write_text(CATALOG)
        script = work / "post.lua"
        script.write_text(WRK_SCRIPT)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SVC_", "TOOLRUN_"))}
        env["TOOLRUN_HOME"] = str(work / "home")
        if "TOOLRUN_SPEEDUPS" in os.environ:
            env["TOOLRUN_SPEEDUPS"] = os.environ["TOOLRUN_SPEEDUPS"]
        ours = toolrun_server(stack, "toolrun (this tree)", SRC, catalog, env, work / "ours.log")
        servers = [ours]
        if args.before is not None:
            src = args.before.resolve() / "src"
            servers.append(toolrun_server(stack, f"toolrun ({args.before})", src, catalog, env, work / "before.log"))
        port = free_port()
        argv = ["webhook", "-hooks", str(webhook_hooks(work)), "-ip", "127.0.0.1", "-port", str(port)]
        hook = stack.enter_context(started("webhook", argv, env, port))
        for server in servers:
            wait_until_serving(server, "/tools/bench.echo", "hi")
        wait_until_serving(hook, "/hooks/echo", "hi")
        targets = [Target(s, "/tools/bench.echo", s.name) for s in servers]
        targets.append(Target(hook, "/hooks/echo", "webhook (Go)"))
        cpu = measure(targets, args.duration, args.rounds, script)
        print(f"load average after: {loadavg()}\n")
        report(targets, cpu)
        if args.profile is not None:
            profile(ours, targets[0].url, script, args.profile)
    print(f"\ntotal bench time {time.monotonic() - began:.0f} s")


def report(targets: list[Target], cpu: dict[str, dict[int, float]]) -> None:
    hook = targets[-1]
    print(f"  {'POST /tools/{key}, exec echo':<34}" + "".join(f"{'c=' + str(c):>16}" for c in CONCURRENCY))
    for t in targets:
        print(f"  {t.label + ' req/s':<34}" + "".join(f"{t.results[c]['rps']:>16.0f}" for c in CONCURRENCY))
    for t in targets[:-1]:
        cells = "".join(f"{t.results[c]['rps'] / hook.results[c]['rps']:>15.2f}x" for c in CONCURRENCY)
        print(f"  {t.label + ' / webhook':<34}{cells}")
    print("\n  server CPU per call (all its processes, tools excluded), us")
    for t in targets:
        cells = "".join(f"{cpu[t.label][c]:>16.0f}" for c in CONCURRENCY)
        print(f"  {t.label:<34}{cells}")
    if RELEASE_CPU_US:
        mine = cpu[targets[0].label][8]
        then = " / ".join(f"{r:.2f}" for r in RELEASE_RATIOS)
        print(
            f"\n  c=8: {mine:.0f} us per call against {RELEASE_CPU_US:.0f} us for release {RELEASE_COMMIT} "
            f"({mine / RELEASE_CPU_US:.2f}x); that release measured {RELEASE_MEASURED}: exec/webhook {then}"
        )
    ours = targets[0].results
    ok = [ours[c]["rps"] / hook.results[c]["rps"] >= goal for c, goal in zip(CONCURRENCY, GOALS, strict=True)]
    print(f"  issue 40's goal (>= {' / '.join(map(str, GOALS))}x webhook): {'met' if all(ok) else 'not met'}")


if __name__ == "__main__":
    main()
