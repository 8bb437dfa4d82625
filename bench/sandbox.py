"""What a sandbox costs a call: a sandboxed `echo hi` beside the plain one, through `ToolService.call`.

    .venv/bin/python bench/sandbox.py            # calls/s and p50: sequential (back to back, and with a 50 ms
                                                 # gap) and 8 at once (about a minute)
    .venv/bin/python bench/sandbox.py --quick    # fewer calls
    .venv/bin/python bench/sandbox.py --flags    # also: what each bwrap option costs (bare bwrap, no toolrun)
    .venv/bin/python bench/sandbox.py --cpu      # only: the CPU a call and a jail cost, all processes counted

Every side runs in rounds, alternating, so a busy moment of the machine hits them alike; the figures are the
medians over the rounds. A script, not a test: it prints and exits 0 (bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CATALOG = """\
group: bench
tools:
  - name: plain
    exec: echo hi
  - name: sandboxed
    exec: echo hi
    sandbox: true
  - name: sandboxed_host_net
    exec: echo hi
    sandbox: {network: host}
"""
# (the row's name, the tool, whether jails are prepared ahead: the `jail_pool` speedup, exec/sandboxpool.py)
ROWS = (
    ("plain", "plain", True),
    ("sandboxed", "sandboxed", True),
    ("sandboxed_host_net", "sandboxed_host_net", True),
    ("sandboxed, no pool", "sandboxed", False),
)
PAUSE = 0.05  # the paced rounds: seconds between one call's answer and the next call


async def _round(service: object, key: str, calls: int, concurrency: int, pause: float = 0.0) -> tuple[float, float]:
    """(calls per second, p50 latency in ms) of `calls` calls, `concurrency` at a time (each worker waits `pause`
    seconds after each call: calls one at a time with a gap, as a user or an agent makes them)."""
    from toolrun.models import Identity

    identity = Identity(username="bench", groups=frozenset({"admin"}), anonymous=False)
    latencies: list[float] = []
    queue = iter(range(calls))

    async def worker() -> None:
        for _ in queue:
            started = time.perf_counter()
            result = await service.call(identity, key, {})  # type: ignore[attr-defined]
            latencies.append(time.perf_counter() - started)
            assert result.value == "hi\n", result
            if pause:
                await asyncio.sleep(pause)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return calls / (time.perf_counter() - started), statistics.median(latencies) * 1000


def measure(calls: int, rounds: int) -> None:
    from toolrun.catalog import load
    from toolrun.exec import sandboxpool
    from toolrun.service import ToolService

    with tempfile.TemporaryDirectory() as home:
        os.environ["TOOLRUN_HOME"] = home
        path = Path(home) / "tools.yaml"
        path.write_text(CATALOG, encoding="utf-8")
        service = ToolService(load([path]))
        for concurrency, pause in ((1, 0.0), (1, PAUSE), (8, 0.0)):
            figures: dict[str, list[tuple[float, float]]] = {row[0]: [] for row in ROWS}
            count = calls if not pause else max(calls // 4, 20)
            for _ in range(rounds):
                for name, tool, pooled in ROWS:
                    sandboxpool.ENABLED = pooled
                    figures[name].append(asyncio.run(_round(service, f"bench.{tool}", count, concurrency, pause)))
                sandboxpool.ENABLED = True
            gap = f", {pause * 1000:.0f} ms between calls (calls/s counts the gaps)" if pause else ", back to back"
            print(f"\nconcurrency {concurrency}{gap}: {count} calls x {rounds} rounds (medians of the rounds)")
            print(f"{'tool':22s} {'calls/s':>9s} {'p50 ms':>8s} {'p50 over plain':>15s}")
            plain_p50 = statistics.median(p for _, p in figures["plain"])
            for name, _, _ in ROWS:
                rate = statistics.median(r for r, _ in figures[name])
                p50 = statistics.median(p for _, p in figures[name])
                extra = "" if name == "plain" else f"{p50 - plain_p50:+.2f} ms"
                print(f"{name:22s} {rate:9.0f} {p50:8.2f} {extra:>15s}")


def flags(runs: int) -> None:
    """bare bwrap around `sh -c 'echo hi'` in a new session (as toolrun starts it), one option at a time added to a
    minimal set-up."""
    from toolrun.exec import sandbox
    from toolrun.exec.sandboxpaths import Binds
    from toolrun.models import Sandbox

    jail = list(sandbox.jail_args(Sandbox(network="none"), None, Binds()))
    links = [a for link in sandbox.SYSTEM_LINKS if os.path.islink(link) for a in ("--symlink", os.readlink(link), link)]
    minimal = ["--ro-bind", "/usr", "/usr", *links]  # enough to run sh
    devices = [a for name in sandbox.DEVICES for a in ("--dev-bind", f"/dev/{name}", f"/dev/{name}")]
    variants = {
        "sh -c (no bwrap)": None,
        "bwrap, mounts only": minimal,
        "+ --unshare-pid --proc": [*minimal, "--unshare-pid", "--proc", "/proc"],
        "+ pid, --as-pid-1 (used)": [*minimal, "--unshare-pid", "--proc", "/proc", "--as-pid-1"],
        "+ --new-session (not used)": [*minimal, "--new-session"],
        "+ --unshare-net": [*minimal, "--unshare-net"],
        "+ --unshare-ipc": [*minimal, "--unshare-ipc"],
        "+ --unshare-uts": [*minimal, "--unshare-uts"],
        "+ --unshare-cgroup-try": [*minimal, "--unshare-cgroup-try"],
        "+ --unshare-user": [*minimal, "--unshare-user"],
        "+ --dev /dev (not used)": [*minimal, "--dev", "/dev"],
        "+ 5 device binds (used)": [*minimal, *devices],
        "toolrun's default jail": jail,
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, options in variants.items():
            argv = ["/bin/sh", "-c", "echo hi"]
            if options is not None:
                argv = ["bwrap", *options, "--", *argv]
            started = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True, start_new_session=True)  # as toolrun starts it
            times[name].append((time.perf_counter() - started) * 1000)
    print(f"\nbare bwrap set-ups, {runs} runs each, interleaved (p50 ms)")
    for name, values in times.items():
        print(f"{name:28s} {statistics.median(values):7.2f}")


def _rusage() -> tuple[float, float]:
    """(this process's CPU, its reaped children's CPU), in ms: user + system."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (me.ru_utime + me.ru_stime) * 1000, (kids.ru_utime + kids.ru_stime) * 1000


def _kthreads() -> float:
    """The CPU the kernel's own threads (kworkers, ksoftirqd, rcu...: children of kthreadd) have used, in ms (their
    schedstat, in ns): a network namespace is torn down there after its last process exited, a user namespace
    freed. Machine-wide: other work counts too."""
    total = 0
    for task in glob.glob("/proc/[0-9]*"):
        try:
            with open(f"{task}/stat", encoding="ascii", errors="replace") as handle:
                if handle.read().rsplit(")", 1)[1].split()[1] != "2":  # its parent is kthreadd
                    continue
            with open(f"{task}/schedstat", encoding="ascii") as handle:
                total += int(handle.read().split()[0])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e6


def _jail_variants() -> dict[str, list[str] | None]:
    """bwrap argvs, as toolrun starts a jail (setpriv first under a root server), with one part of the default
    jail left out at a time; and the floors: a plain shell, setpriv alone, bwrap with the fewest options."""
    from toolrun.exec import sandbox
    from toolrun.exec.sandboxpaths import Binds
    from toolrun.models import Sandbox

    jail = list(sandbox.jail_args(Sandbox(network="none"), None, Binds()))
    drop = sandbox.ids(None)
    prefix = sandbox._drop_argv(*drop) if drop is not None else []
    bwrap = [*prefix, sandbox.engine().path or "bwrap"]
    takes = {"--symlink": 2, "--ro-bind": 2, "--dev-bind": 2, "--proc": 1, "--remount-ro": 1, "--size": 1}
    takes |= {"--tmpfs": 1, "--chdir": 1, "--perms": 1}
    options = []  # the jail as (option, its arguments...) groups
    index = 0
    while index < len(jail):
        count = takes.get(jail[index], 0)
        options.append(jail[index : index + 1 + count])
        index += 1 + count

    def without(*drop: object) -> list[str]:
        return [*bwrap, *(a for group in options if not any(d(group) for d in drop) for a in group)]  # type: ignore[operator]

    def named(*names: str) -> object:
        return lambda group: group[0] in names

    proc_covers = lambda group: group[0] == "--ro-bind" and group[2].startswith("/proc/")  # noqa: E731
    devices = lambda group: group[0] == "--dev-bind" or (group[0] == "--symlink" and group[2].startswith("/dev/"))  # noqa: E731
    links = [a for group in options if group[0] == "--symlink" and not group[2].startswith("/dev/") for a in group]
    least = [*bwrap, "--ro-bind", "/usr", "/usr", *links]
    return {
        "sh -c (no bwrap)": None,
        f"{os.path.basename(prefix[0])} to nobody, then sh -c" if prefix else "(not root: no drop)": prefix or None,
        "toolrun's default jail": without(),
        "  less --unshare-net": without(named("--unshare-net")),
        "  less ipc, uts, cgroup": without(named("--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")),
        "  less pid (and /proc)": without(
            named("--unshare-pid", "--as-pid-1", "--proc"), proc_covers, lambda g: g == ["--remount-ro", "/proc"]
        ),
        "  less the /proc covers": without(proc_covers),
        "  less --remount-ro /proc": without(lambda g: g == ["--remount-ro", "/proc"]),
        "  less /dev (its nodes and links)": without(devices),
        "  less the /tmp tmpfs": without(named("--size", "--tmpfs", "--chdir")),
        "  less --remount-ro /": without(lambda g: g == ["--remount-ro", "/"]),
        "bwrap, /usr and links only": least,
        "bwrap --unshare-all, /proc, --dev": [*least, "--unshare-all", "--proc", "/proc", "--dev", "/dev"],
    }


def cpu(runs: int, rounds: int) -> None:
    """The CPU a call costs, all processes counted (getrusage of this process and of its reaped children: the
    kernel's own count, which a busy machine does not inflate as it does wall time), and the kernel threads' CPU
    over the same calls. First through executor.run (plain; sandboxed with jails prepared ahead; without), one call
    at a time with a 20 ms gap (a prepared jail is refilled in it, and counted); then bare bwrap around `sh -c`
    (started with an empty environment in a new session, as toolrun starts it), one part of the jail left out at
    a time."""
    from toolrun.exec import executor, sandboxpool
    from toolrun.models import Sandbox

    async def calls(box: Sandbox | None, count: int) -> None:
        for _ in range(count):
            done = await executor.run("echo hi", timeout=10, env={"PATH": "/usr/bin:/bin"}, sandbox=box)
            assert done.stdout == "hi\n", done
            await asyncio.sleep(0.02)

    box = Sandbox(network="none")
    rows: dict[str, tuple[Sandbox | None, bool]] = {
        "plain": (None, True),
        "sandboxed": (box, True),
        "sandboxed, no pool": (box, False),
    }
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in rows}
    for _ in range(rounds):
        for name, (sandbox_, pooled) in rows.items():
            sandboxpool.ENABLED = pooled
            asyncio.run(calls(sandbox_, 3))  # the pool's jails for it are ready
            me, kids, kernel = *_rusage(), _kthreads()
            asyncio.run(calls(sandbox_, runs))
            after = _rusage()  # before the jails left ready are killed and reaped: `runs` jails were reaped
            found[name].append(((after[0] - me) / runs, (after[1] - kids) / runs, (_kthreads() - kernel) / runs))
            sandboxpool.close_all()
        sandboxpool.ENABLED = True
    print(f"\nCPU per call through executor.run, {runs} calls x {rounds} rounds, 20 ms apart (ms, medians)")
    print(f"{'call':32s} {'server':>7s} {'its processes':>14s} {'together':>9s} {'kernel threads':>15s}")
    for name, values in found.items():
        me, kids, kernel = (statistics.median(v[i] for v in values) for i in range(3))
        print(f"{name:32s} {me:7.2f} {kids:14.2f} {me + kids:9.2f} {kernel:15.2f}")

    variants = _jail_variants()
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, argv in variants.items():
            if argv is None and name.startswith("(not root"):
                continue
            command = [
                *(argv or []),
                *(["--"] if argv and "bwrap" in " ".join(argv) else []),
                "/bin/sh",
                "-c",
                "echo hi",
            ]
            _, kids = _rusage()
            kernel = _kthreads()
            for _ in range(runs):
                subprocess.run(command, capture_output=True, check=True, start_new_session=True, env={})
            times[name].append(((_rusage()[1] - kids) / runs, (_kthreads() - kernel) / runs))
    print(f"\nCPU per run of bare bwrap around `sh -c 'echo hi'`, {runs} runs x {rounds} rounds (ms, medians)")
    print(f"{'set-up':36s} {'its processes':>14s} {'kernel threads':>15s}")
    for name, values in times.items():
        if values:
            kids, kernel = (statistics.median(v[i] for v in values) for i in range(2))
            print(f"{name:36s} {kids:14.2f} {kernel:15.2f}")


def binds(runs: int) -> None:
    """What opening and checking a profile's paths costs one call (sandboxpaths.open_binds: openat2 without links,
    identity checks against toolrun's own files, descriptors for bwrap), for 0 and for 4 bound paths."""
    from toolrun.exec import sandbox
    from toolrun.exec.sandboxpaths import open_binds

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "a" / "b"
        for name in ("r1", "r2", "w", "cwd", "catalogs", "beside"):
            (base / name).mkdir(parents=True)
        for i in range(10):  # a cwd holding its catalog file beside 10 scripts: shown as a copy of the 10
            (base / "beside" / f"script{i}.sh").write_text("echo hi\n")
        beside = [str(base / "beside" / "tools.yaml")]
        Path(beside[0]).write_text("group: g\n")
        loaded = [str(base / "catalogs" / f"tools{i}.yaml") for i in range(200)]  # catalog files a load read
        for path in loaded:
            Path(path).write_text("group: g\n")
        private = sandbox.private_paths()
        shapes = {
            "no bound path": ((), (), None, []),
            "2 readable, 1 writable, a cwd": ((f"{base}/r1", f"{base}/r2"), (f"{base}/w",), f"{base}/cwd", []),
            "a cwd holding 200 catalog files": ((), (), f"{base}/catalogs", loaded),
            "a cwd: its catalog and 10 files": ((), (), f"{base}/beside", beside),
        }
        print(f"\n{'bound paths':32s} {'median us':>10s} {'p90 us':>8s}")
        for name, (readable, writable, cwd, files) in shapes.items():
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                opened = open_binds(readable, writable, cwd, private, True, files, (), sandbox.SYSTEM_READ_ONLY)
                times.append(time.perf_counter() - started)
                opened.close()
            times.sort()
            print(f"{name:32s} {statistics.median(times) * 1e6:10.0f} {times[int(len(times) * 0.9)] * 1e6:8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    parser.add_argument("--flags", action="store_true", help="also measure each bwrap option on its own")
    parser.add_argument("--binds", action="store_true", help="only: what opening and checking bound paths costs")
    parser.add_argument("--cpu", action="store_true", help="only: the CPU a call and a jail cost, all processes")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from toolrun.exec.sandbox import engine

    found = engine(probe=True)
    if not found.ok:
        print(f"no sandbox here: {found.problem}")
        return
    print(f"bwrap: {found.path}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    if args.binds:
        binds(2000)
        return
    if args.cpu:
        cpu(20 if args.quick else 50, 3 if args.quick else 5)
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
        return
    measure(calls=50 if args.quick else 200, rounds=3 if args.quick else 5)
    if args.flags:
        flags(20 if args.quick else 60)


if __name__ == "__main__":
    main()
