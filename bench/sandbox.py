"""What a sandbox costs a call: a sandboxed `echo hi` beside the plain one, through `ToolService.call`.

    .venv/bin/python bench/sandbox.py            # calls/s and p50: sequential (back to back, and with a 50 ms
                                                 # gap) and 8 at once (about a minute)
    .venv/bin/python bench/sandbox.py --quick    # fewer calls
    .venv/bin/python bench/sandbox.py --flags    # also: what each bwrap option costs (bare bwrap, no toolrun)
    .venv/bin/python bench/sandbox.py --cpu      # only: the CPU a call and a jail cost, all processes counted
    .venv/bin/python bench/sandbox.py --floor    # only: the cheapest jail with fresh namespaces (no bwrap), and
                                                 # the best ratio to plain at concurrency 8 it leaves
    .venv/bin/python bench/sandbox.py --healthz  # only: how long a GET /healthz waits while a real `toolrun serve`
                                                 # (one worker) answers 8 calls at once, plain or sandboxed
    .venv/bin/python bench/sandbox.py --src DIR  # toolrun from DIR (another checkout's src/: before and after)

Every side runs in rounds, alternating, so a busy moment of the machine hits them alike; the figures are the
medians over the rounds. A script, not a test: it prints and exits 0 (bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import resource
import shutil
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


TICK = 0.005  # the loop's lag: a timer due every 5 ms, and how late it fires (a `GET /healthz` waits as long)


async def _round(
    service: object, key: str, calls: int, concurrency: int, pause: float = 0.0, lags: list[float] | None = None
) -> tuple[float, float]:
    """(calls per second, p50 latency in ms) of `calls` calls, `concurrency` at a time (each worker waits `pause`
    seconds after each call: calls one at a time with a gap, as a user or an agent makes them). `lags`: how late
    (ms) a 5 ms timer fired each time while the calls ran (the event loop held by a start: a request waits)."""
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

    async def ticker() -> None:
        while True:
            due = time.perf_counter() + TICK
            await asyncio.sleep(TICK)
            lags.append((time.perf_counter() - due) * 1000)  # type: ignore[union-attr]

    ticking = asyncio.ensure_future(ticker()) if lags is not None else None
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    rate = calls / (time.perf_counter() - started)
    if ticking is not None:
        ticking.cancel()
    return rate, statistics.median(latencies) * 1000


def _quantile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else 0.0


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
            lags: dict[str, list[float]] = {row[0]: [] for row in ROWS}
            count = calls if not pause else max(calls // 4, 20)
            for _ in range(rounds):
                for name, tool, pooled in ROWS:
                    sandboxpool.ENABLED = pooled
                    lag = lags[name] if concurrency > 1 else None
                    figures[name].append(asyncio.run(_round(service, f"bench.{tool}", count, concurrency, pause, lag)))
                sandboxpool.ENABLED = True
            gap = f", {pause * 1000:.0f} ms between calls (calls/s counts the gaps)" if pause else ", back to back"
            print(f"\nconcurrency {concurrency}{gap}: {count} calls x {rounds} rounds (medians of the rounds)")
            lagged = concurrency > 1
            head = f" {'ratio':>6s} {'loop late p50/p99/max ms':>25s}" if lagged else ""
            print(f"{'tool':22s} {'calls/s':>9s} {'p50 ms':>8s} {'p50 over plain':>15s}{head}")
            plain_p50 = statistics.median(p for _, p in figures["plain"])
            plain_rate = statistics.median(r for r, _ in figures["plain"])
            for name, _, _ in ROWS:
                rate = statistics.median(r for r, _ in figures[name])
                p50 = statistics.median(p for _, p in figures[name])
                extra = "" if name == "plain" else f"{p50 - plain_p50:+.2f} ms"
                late = lags[name]
                tail = f" {rate / plain_rate:6.2f} {_quantile(late, 0.5):7.2f} / {_quantile(late, 0.99):6.2f} / "
                tail += f"{max(late, default=0.0):6.2f}"
                print(f"{name:22s} {rate:9.0f} {p50:8.2f} {extra:>15s}{tail if lagged else ''}")


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


def _call_cpu(runs: int, rounds: int) -> dict[str, tuple[float, float, float]]:
    """The CPU a call costs, all processes counted (getrusage of this process and of its reaped children: the
    kernel's own count, which a busy machine does not inflate as it does wall time), and the kernel threads' CPU
    over the same calls, through executor.run (plain; sandboxed with jails prepared ahead; without), one call at a
    time with a 20 ms gap (a prepared jail is refilled in it, and counted). Returns the medians per row (ms: this
    process, its processes, the kernel's threads)."""
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
    medians = {}
    for name, values in found.items():
        me, kids, kernel = medians[name] = tuple(statistics.median(v[i] for v in values) for i in range(3))  # type: ignore[assignment]
        print(f"{name:32s} {me:7.2f} {kids:14.2f} {me + kids:9.2f} {kernel:15.2f}")
    return medians  # type: ignore[return-value]


def cpu(runs: int, rounds: int) -> None:
    """What `_call_cpu` says, then bare bwrap around `sh -c` (started with an empty environment in a new session,
    as toolrun starts it), one part of the jail left out at a time."""
    _call_cpu(runs, rounds)

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


# --floor: the cheapest jail with fresh namespaces, made by a resident process without bwrap (a prototype, not
# toolrun's jail: no seccomp filter, no new root, no binds). Linux's clone flags and mount flags:
NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET = 0x20000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000
NEWCGROUP = 0x2000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000
EVERY = NEWNS | NEWUTS | NEWIPC | NEWPID | NEWNET | NEWCGROUP
NOBODY = 65534
FLOOR_COMMAND = "echo hi"  # what each jail runs
# shape -> (the namespaces, a user namespace whose root is `nobody` outside); None: fork and _exit only
FLOOR_SHAPES: dict[str, tuple[int, bool] | None] = {
    "the helper's fork alone (no exec)": None,
    "fork, exec sh (no namespace)": (0, False),
    "mount, pid, net, ipc, uts, cgroup; to nobody": (EVERY, False),
    "  the same less the network namespace": (EVERY & ~NEWNET, False),
    "a user namespace too (root in it: nobody)": (EVERY | NEWUSER, True),
    "  a user namespace, less the network namespace": ((EVERY | NEWUSER) & ~NEWNET, True),
}


def _jail_child(libc: object, flags: int, user_ns: bool, out: int) -> int:
    """In the helper's child: drop (a root helper, before a user namespace: its root is then `nobody` outside),
    unshare, fork the jail's first process, which makes the jail's mounts private, mounts its own /proc and a
    private /tmp, drops (a root helper without a user namespace) and execs `sh -c 'echo hi'`."""
    root = os.geteuid() == 0
    if user_ns and root:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        libc.prctl(4, 1, 0, 0, 0)  # type: ignore[attr-defined]  # PR_SET_DUMPABLE: a changed uid made /proc/self root's
    outside = os.geteuid()
    if flags and libc.unshare(flags) != 0:  # type: ignore[attr-defined]
        return 101
    if user_ns:
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {outside} 1"), ("gid_map", f"0 {os.getegid()} 1")):
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
            os.write(fd, text.encode())
            os.close(fd)
    first = os.fork() if flags & NEWPID else 0
    if first == 0:
        try:
            if flags & NEWNS:
                mount = libc.mount  # type: ignore[attr-defined]
                if mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
                    os._exit(102)
                if mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) != 0:
                    os._exit(103)
                if mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64m,mode=1777") != 0:
                    os._exit(104)
            if root and not user_ns and flags:
                os.setgroups([])
                os.setresgid(NOBODY, NOBODY, NOBODY)
                os.setresuid(NOBODY, NOBODY, NOBODY)
            os.dup2(out, 1)
            os.execve("/bin/sh", ["sh", "-c", FLOOR_COMMAND], {})
        finally:
            os._exit(127)
    _, status = os.waitpid(first, 0)
    return os.waitstatus_to_exitcode(status)


def floor_helper(shape: str, runs: int) -> None:
    """The resident prototype (a process of its own, started once): `runs` jails of `shape`, one after the other;
    prints its CPU per jail (itself, its reaped children: ms)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    how = FLOOR_SHAPES[shape]
    read, write = os.pipe()

    def one() -> None:
        pid = os.fork()
        if pid == 0:
            code = 100
            try:
                code = 0 if how is None else _jail_child(libc, *how, write)
            except BaseException as error:
                os.write(2, f"{error!r}\n".encode())
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        said = os.read(read, 64) if how is not None and not status else b"hi\n"
        if status or said != b"hi\n":
            raise SystemExit(f"{shape}: exit {os.waitstatus_to_exitcode(status)}, said {said!r}")

    for _ in range(3):
        one()
    me, kids = _rusage()
    for _ in range(runs):
        one()
    after = _rusage()
    print((after[0] - me) / runs, (after[1] - kids) / runs)


def _floor_c() -> str | None:
    """bench/floor_jail.c compiled into a temporary folder (None: no C compiler here)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    built = os.path.join(tempfile.mkdtemp(prefix="toolrun-floor-"), "floor_jail")
    source = str(Path(__file__).resolve().parent / "floor_jail.c")
    done = subprocess.run([compiler, "-O2", "-o", built, source], capture_output=True, text=True)
    return built if done.returncode == 0 else None


def _floor_rows(built: str | None) -> dict[str, list[str]]:
    """The prototype's rows: (its label, the resident process's argv; it prints its CPU per jail: itself, its
    reaped children)."""
    rows = {}
    root = os.geteuid() == 0
    for shape, how in FLOOR_SHAPES.items():
        if root or how is None or how[1]:
            rows[f"Python: {shape.strip()}"] = [sys.executable, __file__, "--floor-helper", shape]
    if built is not None:
        for shape, how in FLOOR_SHAPES.items():
            if how is not None and (root or how[1]):
                label = shape.strip().replace("fork, exec", "clone, exec")
                rows[f"C: {label}"] = [built, str(how[0]), str(int(how[1]))]
        if root and os.path.isdir("/dev/toolrun-jail-dev"):  # the /dev folder a root server made (sandbox.py)
            rows["C: all of them, toolrun's mounts and pivot_root"] = [built, str(EVERY), "2"]
    return rows


def floor(runs: int, rounds: int) -> None:
    """The floor of fresh namespaces: toolrun's calls (`_call_cpu`), the prototype's jails (`floor_helper` in
    Python: a fork for the namespaces and one for the PID namespace's first process; bench/floor_jail.c: one
    clone), bare bwrap's floor, and the best ratio to plain at concurrency 8 that a jail maker at that cost leaves.
    The kernel's threads are read 0.3 s after a row's last jail (a network namespace is torn down in a work queue
    after its last process exits)."""
    calls = _call_cpu(runs, rounds)
    built = _floor_c()
    rows = _floor_rows(built)
    least = _jail_variants()["bwrap --unshare-all, /proc, --dev"]
    bare_floor = "bare bwrap --unshare-all, /proc, --dev"
    found: dict[str, list[tuple[float, ...]]] = {name: [] for name in [*rows, bare_floor]}
    for _ in range(rounds):
        for name, argv in rows.items():
            time.sleep(0.3)
            kernel = _kthreads()
            said = subprocess.run([*argv, str(runs)], capture_output=True, text=True)
            time.sleep(0.3)
            if said.returncode:
                print(f"{name}: {said.stderr.strip()[-300:]}")
                continue
            me, kids = (float(word) for word in said.stdout.split())
            found[name].append((me, kids, (_kthreads() - kernel) / runs))
        time.sleep(0.3)
        _, kids = _rusage()
        kernel = _kthreads()
        for _ in range(runs):
            subprocess.run([*least, "--", "/bin/sh", "-c", "echo hi"], capture_output=True, check=True, env={})  # type: ignore[misc]
        time.sleep(0.3)
        found[bare_floor].append((0.0, (_rusage()[1] - kids) / runs, (_kthreads() - kernel) / runs))
    if built is None:
        print("\n(no C compiler here: the C rows are left out)")
    print(f"\nCPU per jail around `sh -c 'echo hi'`, {runs} jails x {rounds} rounds, one at a time (ms, medians)")
    print(f"{'jail':52s} {'maker':>6s} {'its processes':>14s} {'kernel threads':>15s} {'all':>6s}")
    totals = {}
    for name, values in found.items():
        if not values:
            continue
        parts = [statistics.median(v[i] for v in values) for i in range(3)]
        totals[name] = sum(parts)
        print(f"{name:52s} {parts[0]:6.2f} {parts[1]:14.2f} {parts[2]:15.2f} {totals[name]:6.2f}")
    plain = sum(calls["plain"])
    server, plain_server = calls["sandboxed"][0], calls["plain"][0]
    print(f"\nplain call, all told: {plain:.2f} ms; a sandboxed call's server side {server:.2f} ms", end="")
    print(f" (a plain call's: {plain_server:.2f})")
    print("best ratio at concurrency 8, on CPU alone: plain call / (server side + the jail)")
    print(f"{'jail':52s} {'sandboxed server side':>22s} {'plain server side':>18s}")
    for name, total in totals.items():
        if "exec sh" in name or "fork alone" in name:
            continue
        print(f"{name:52s} {plain / (server + total):22.2f} {plain / (plain_server + total):18.2f}")
    print(f"{'toolrun now (bwrap, jails prepared ahead)':52s} {plain / sum(calls['sandboxed']):22.2f}")


HEALTHZ_CATALOG = """\
group: bench
tools:
  - name: plain
    public: true
    exec: echo hi
  - name: sandboxed
    public: true
    exec: echo hi
    sandbox: true
"""


async def _probe_while_loaded(port: int, tool: str | None, seconds: float) -> list[float]:
    """GET /healthz every 20 ms (ms each took) while 8 clients call `tool` back to back (None: no load)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from support.http import raw_call

    waits: list[float] = []
    until = time.perf_counter() + seconds

    async def caller() -> None:
        while time.perf_counter() < until:
            status, _, body, _ = await raw_call(
                port, "POST", f"/tools/bench.{tool}", b"{}", {"content-type": "application/json"}
            )
            assert status == 200, (status, body)

    async def prober() -> None:
        await asyncio.sleep(0.2)  # the calls are running
        while time.perf_counter() < until - 0.1:
            status, _, _, took = await raw_call(port, "GET", "/healthz")
            assert status == 200
            waits.append(took * 1000)
            await asyncio.sleep(0.02)

    await asyncio.gather(prober(), *(caller() for _ in range(8 if tool else 0)))
    return waits


def healthz(rounds: int, seconds: float, src: str | None) -> None:
    """A real `toolrun serve --workers 1` (toolrun from `src` when given): GET /healthz's latency, idle and while 8
    clients call the plain or the sandboxed `echo hi` back to back; rounds alternate the loads."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from support.servers import ToolrunServer

    with tempfile.TemporaryDirectory() as tmp:
        catalog = Path(tmp) / "tools.yaml"
        catalog.write_text(HEALTHZ_CATALOG, encoding="utf-8")
        server = ToolrunServer(Path(tmp), catalog, args=["--workers", "1"])
        if src:
            server.env["PYTHONPATH"] = src
        server.start()
        try:
            found: dict[str, list[float]] = {"idle": [], "plain": [], "sandboxed": []}
            for _ in range(rounds):
                for load in found:
                    tool = None if load == "idle" else load
                    found[load] += asyncio.run(_probe_while_loaded(server.port, tool, seconds))
        finally:
            server.stop()
    print(f"\nGET /healthz while 8 clients call back to back ({rounds} rounds of {seconds:.0f} s; ms)")
    print(f"{'load':12s} {'probes':>7s} {'p50':>7s} {'p90':>7s} {'p99':>7s} {'max':>7s}")
    for load, waits in found.items():
        quantiles = [_quantile(waits, q) for q in (0.5, 0.9, 0.99)]
        print(f"{load:12s} {len(waits):7d} " + " ".join(f"{q:7.2f}" for q in quantiles) + f" {max(waits):7.2f}")


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
    parser.add_argument("--floor", action="store_true", help="only: the cheapest jail with fresh namespaces")
    parser.add_argument("--floor-helper", nargs=2, metavar=("SHAPE", "RUNS"), help=argparse.SUPPRESS)
    parser.add_argument("--healthz", action="store_true", help="only: GET /healthz's wait under 8 calls at once")
    parser.add_argument("--src", help="import toolrun from this folder (another checkout's src/: before and after)")
    args = parser.parse_args()
    if args.floor_helper:  # the prototype's resident process: imports nothing of toolrun
        floor_helper(args.floor_helper[0], int(args.floor_helper[1]))
        return
    sys.path.insert(0, args.src or str(Path(__file__).resolve().parent.parent / "src"))
    from toolrun.exec.sandbox import engine

    found = engine(probe=True)
    if not found.ok:
        print(f"no sandbox here: {found.problem}")
        return
    import toolrun

    print(f"toolrun: {Path(toolrun.__file__).parent}")
    print(f"bwrap: {found.path}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    if args.binds:
        binds(2000)
        return
    if args.healthz:
        healthz(3 if args.quick else 5, 4.0, args.src)
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
        return
    if args.floor:
        floor(20 if args.quick else 50, 3 if args.quick else 5)
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
        return
    if args.cpu:
        cpu(20 if args.quick else 50, 3 if args.quick else 5)
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
        return
    measure(calls=50 if args.quick else 200, rounds=3 if args.quick else 5)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    if args.flags:
        flags(20 if args.quick else 60)


if __name__ == "__main__":
    main()
