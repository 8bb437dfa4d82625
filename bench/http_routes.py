"""HTTP benchmarks: `toolrun serve` against the bare things it competes with (a script, not a test).

    .venv/bin/python bench/http_routes.py                           # everything, about 3 minutes on 2 cores
    .venv/bin/python bench/http_routes.py --duration 1 --rounds 1   # a smoke run, about 30 seconds
    .venv/bin/python bench/http_routes.py --only exec               # just the exec comparison (or: fn, light)

Side by side in one run, with wrk (Debian `wrk`) over loopback at concurrency 1, 8 and 32, each
request a POST with the JSON body {"msg": "hi"} and `Content-Type: application/json`:

  exec: one `/bin/sh -c "printf '%s' hi"` per request
    toolrun      POST /tools/bench.echo        (exec: printf '%s' {{ msg | quote }})
    webhook      adnanh/webhook (Debian `webhook`), a hook running the same sh -c command
    bare         a Starlette route on uvicorn (asyncio loop, httptools) that parses the JSON and spawns
                 the same command with asyncio's subprocess, Python 3.11's default child watcher
    bare+pidfd   the same with an `asyncio.PidfdChildWatcher` attached (the best bare variant here)
  fn: no process
    toolrun      POST /tools/bench.fn_echo     (a plain `def`, run in the default thread pool)
    toolrun      POST /tools/bench.afn_echo    (an `async def`, run on the loop)
    toolrun      POST /tools/bench.ifn_echo    (the plain `def` with `inline: true`, called on the loop)
    bare         a Starlette route that parses the JSON and returns the value
    bare+thread  the same, calling a plain def through the loop's default thread pool (for information: what a
                 plain `def` tool's thread handoff costs anyone)

  light: routes that spawn nothing (GET, no body)
    toolrun      GET /healthz and GET /tools/bench.echo, access log on (the default level, to a file)
    bare         a Starlette app with the same two routes and no middleware: {"status": "ok"}, and the
                 tool's entry as JSON

Every toolrun row is measured twice: with the default workers (one per CPU) and with `--workers 1`.
Targets (issue 14): exec with the default workers >= 1.1x webhook at c=8 and c=32, exec with one worker
>= 1.0x the best bare spawn route; GET /healthz and GET /tools/{key} with one worker >= 0.8x bare Starlette
at c=8 (and more with the default workers).

Printed: requests/s, p50 and p99 latency and the server's own CPU time per request (tool children
excluded), per server and concurrency; the ratios against the issue's targets (exec >= 0.8x the
best bare spawn route at every concurrency, >= 0.8x webhook at c=1 and >= 0.65x at c=8 and 32;
fn >= 0.5x the bare JSON route); each server's resident memory after the run. Everything runs
under a temporary TOOLRUN_HOME; the exit status is 0 whether or not a target is met (the verdict
column says). The machine may be shared: the load average is printed
before and after; servers are measured interleaved, best of `--rounds`; and CPU per request, which
other load hardly changes, is printed next to each throughput ratio (baseline CPU / toolrun CPU:
the throughput ratio a CPU-bound, otherwise idle machine would show).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PYTHON = sys.executable
TOOLRUN = str(Path(sys.executable).parent / "toolrun")
CONCURRENCY = (1, 8, 32)
BODY = '{"msg": "hi"}'
SH_COMMAND = "printf '%s' "  # + the quoted message: the same command for every server

CATALOG = """\
version: 1
group: bench
tools:
  - name: echo
    public: true
    description: Print the message (one sh -c per call).
    exec: printf '%s' {{ msg | quote }}
    params:
      - name: msg
        type: str
  - name: fn_echo
    public: true
    fn: bench_fns:echo
  - name: afn_echo
    public: true
    fn: bench_fns:aecho
  - name: ifn_echo
    public: true
    fn: bench_fns:echo
    inline: true
"""

FNS = '''\
def echo(msg: str) -> str:
    """Return the message (a plain def: toolrun runs it in a worker thread)."""
    return msg


async def aecho(msg: str) -> str:
    """Return the message (async: toolrun awaits it on the event loop)."""
    return msg
'''

WRK_SCRIPT = """\
wrk.method = "POST"
wrk.body = '@BODY@'
wrk.headers["Content-Type"] = "application/json"

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, "errors": %d, "non2xx": %d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
""".replace("@BODY@", BODY)


GET_SCRIPT = WRK_SCRIPT.replace('wrk.method = "POST"', 'wrk.method = "GET"').replace(f"wrk.body = '{BODY}'", "")

# -- the bare baselines (run as `bench/http_routes.py --child KIND --port N`) --------------------------------


def child(kind: str, port: int) -> None:
    import asyncio
    import shlex
    import warnings
    from contextlib import asynccontextmanager

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Route

    async def spawn(request: Request) -> PlainTextResponse:
        data = json.loads(await request.body())
        command = SH_COMMAND + shlex.quote(str(data["msg"]))
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        return PlainTextResponse(out.decode())

    async def sleep(request: Request) -> PlainTextResponse:
        # bench/load.py's bare baseline: `sleep <seconds>` with no shell, as toolrun runs `exec: sleep {{ seconds }}`.
        data = json.loads(await request.body())
        proc = await asyncio.create_subprocess_exec(
            shutil.which("sleep") or "/bin/sleep",
            str(data["seconds"]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        return PlainTextResponse(out.decode())

    async def echo(request: Request) -> PlainTextResponse:
        data = json.loads(await request.body())
        return PlainTextResponse(str(data["msg"]))

    def plain(msg: str) -> str:
        return msg

    async def echo_in_thread(request: Request) -> PlainTextResponse:
        data = json.loads(await request.body())
        value = await asyncio.get_running_loop().run_in_executor(None, plain, str(data["msg"]))
        return PlainTextResponse(value)

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        if kind in ("spawn-pidfd", "sleep"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                watcher = asyncio.PidfdChildWatcher()
                asyncio.get_event_loop_policy().set_child_watcher(watcher)
                watcher.attach_loop(asyncio.get_running_loop())
        yield

    entry = {"key": "bench.echo", "description": "Print the message (one sh -c per call).", "public": True}

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def tool(request: Request) -> JSONResponse:
        if request.path_params["key"] != "bench.echo":
            return JSONResponse({"error": "not found"}, status_code=404)
        return JSONResponse(entry)

    endpoint = {"json": echo, "json-thread": echo_in_thread, "sleep": sleep}.get(kind, spawn)
    routes = [Route("/run", endpoint, methods=["POST"])]
    if kind == "light":
        routes = [Route("/healthz", healthz, methods=["GET"]), Route("/tools/{key}", tool, methods=["GET"])]
    app = Starlette(routes=routes, lifespan=lifespan)
    uvicorn.run(
        app, host="127.0.0.1", port=port, loop="asyncio", http="httptools", log_level="warning", access_log=False
    )


# -- servers -------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    base: str
    rss_kb: int = 0

    def pids(self) -> list[int]:
        """The server process and its worker processes (its long-lived children; tool children come and go)."""
        pids = [self.process.pid]
        try:
            children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        except OSError:
            children = []
        try:
            own = Path(f"/proc/{self.process.pid}/cmdline").read_bytes()
        except OSError:
            return pids
        for child in children:
            try:
                if Path(f"/proc/{child}/cmdline").read_bytes() == own:  # a forked worker, not a tool's process
                    pids.append(int(child))
            except OSError:
                continue
        return pids

    def cpu_split(self) -> tuple[float, float]:
        """(the server's own CPU seconds, its tool children's): the children's is what the server and its workers
        have reaped so far (cutime + cstime), so every finished tool process of a run is counted."""
        own = children = 0
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            own += int(fields[11]) + int(fields[12])
            children += int(fields[13]) + int(fields[14])
        tick = os.sysconf("SC_CLK_TCK")
        return own / tick, children / tick

    def rss(self) -> int:
        """Resident memory (kB) of the server process, or of its largest worker when it has workers."""
        pids = self.pids()
        sizes = []
        for pid in pids[1:] or pids:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        sizes.append(int(line.split()[1]))
            except OSError:
                pass
        return max(sizes, default=0)


@dataclass
class Target:
    server: Server
    path: str
    label: str
    results: dict[int, dict[str, float]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.base + self.path


def _wait_get(server: Server, path: str, deadline: float = 60.0) -> None:
    import urllib.error
    import urllib.request

    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if server.process.poll() is not None:
            raise SystemExit(f"{server.name} exited with {server.process.returncode}")
        try:
            with urllib.request.urlopen(server.base + path, timeout=5) as response:
                response.read()
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.05)
    raise SystemExit(f"{server.name} did not answer within {deadline}s")


def wait_until_serving(server: Server, path: str, expect: str, deadline: float = 60.0) -> None:
    import urllib.error
    import urllib.request

    end = time.monotonic() + deadline
    last: Exception | None = None
    while time.monotonic() < end:
        if server.process.poll() is not None:
            raise SystemExit(f"{server.name} exited with {server.process.returncode}")
        request = urllib.request.Request(
            server.base + path, data=BODY.encode(), headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                text = response.read().decode()
            if text.strip() != expect:
                raise SystemExit(f"{server.name} {path}: expected {expect!r}, got {text!r}")
            return
        except (urllib.error.URLError, ConnectionError) as exc:
            last = exc
            time.sleep(0.05)
    raise SystemExit(f"{server.name} did not answer within {deadline}s: {last}")


@contextmanager
def started(name: str, argv: list[str], env: dict[str, str], port: int, stderr: Any = None) -> Iterator[Server]:
    process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    server = Server(name, process, f"http://127.0.0.1:{port}")
    try:
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def webhook_hooks(directory: Path) -> Path:
    hooks = [
        {
            "id": "echo",
            "execute-command": "/bin/sh",
            "http-methods": ["POST"],
            "include-command-output-in-response": True,
            # sh -c 'printf '%s' "$0"' <msg>: the same shell and builtin, with the message from the JSON payload
            "pass-arguments-to-command": [
                {"source": "string", "name": "-c"},
                {"source": "string", "name": SH_COMMAND + '"$0"'},
                {"source": "payload", "name": "msg"},
            ],
        }
    ]
    path = directory / "hooks.json"
    path.write_text(json.dumps(hooks, indent=2))
    return path


# -- wrk -----------------------------------------------------------------------------------------------


def run_wrk(url: str, connections: int, seconds: float, script: Path, server: Server | None = None) -> dict[str, float]:
    """One wrk run; with `server`, also its CPU time per request (robust to other load: stolen time is not ours),
    its tool children's CPU time per request, and the share of the machine's CPU time left idle meanwhile."""
    before = server.cpu_split() if server else (0.0, 0.0)
    idle_before = machine_idle()
    argv = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        url,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    after = server.cpu_split() if server else (0.0, 0.0)
    idle_after = machine_idle()
    cpu, tools = after[0] - before[0], after[1] - before[1]
    idle = (idle_after[0] - idle_before[0]) / max(1, idle_after[1] - idle_before[1])
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            raw = json.loads(line[len("RESULT ") :])
            return {
                "requests": raw["requests"],
                "rps": raw["requests"] / (raw["duration_us"] / 1e6),
                "cpu_us": cpu / max(1, raw["requests"]) * 1e6,
                "tools_us": tools / max(1, raw["requests"]) * 1e6,
                "idle": idle,
                "p50_ms": raw["p50_us"] / 1000,
                "p99_ms": raw["p99_us"] / 1000,
                "errors": raw["errors"],
                "non2xx": raw["non2xx"],
            }
    raise SystemExit(f"wrk failed for {url}:\n{done.stdout}\n{done.stderr}")


def machine_idle() -> tuple[int, int]:
    """(idle + iowait ticks, all ticks) of the whole machine so far, from /proc/stat."""
    try:
        ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return ticks[3] + ticks[4], sum(ticks[:8])


def measure(targets: list[Target], seconds: float, rounds: int, script: Path) -> None:
    """Each concurrency in turn, the servers interleaved, `rounds` times; the best round of each counts.

    On a shared machine a burst of someone else's work lands on whichever server is being measured:
    interleaving spreads it, and the best of the rounds is the figure least disturbed by it."""
    for target in targets:
        run_wrk(target.url, 8, 1, script)  # warm-up: imports, caches, connection setup
    for c in CONCURRENCY:
        for _ in range(rounds):
            for target in targets:
                result = run_wrk(target.url, c, seconds, script, target.server)
                best = target.results.get(c)
                if best is None or result["rps"] > best["rps"]:
                    target.results[c] = result
        for target in targets:
            r = target.results[c]
            flag = "" if not (r["errors"] or r["non2xx"]) else f"  errors={r['errors']:.0f} non2xx={r['non2xx']:.0f}"
            print(
                f"  {target.label:<38} c={c:<3} {r['rps']:8.0f} req/s  p50 {r['p50_ms']:6.2f} ms"
                f"  p99 {r['p99_ms']:7.2f} ms  cpu {r['cpu_us']:5.0f} us/req{budget(r)}{flag}",
                flush=True,
            )
    for target in targets:
        target.server.rss_kb = max(target.server.rss_kb, target.server.rss())


def budget(result: dict[str, float]) -> str:
    """The tool children's CPU per request and the machine's idle share, for a route that spawns (else nothing)."""
    if result.get("tools_us", 0) < 1:
        return ""
    return f"  tools {result['tools_us']:5.0f} us/req  idle {result['idle'] * 100:3.0f}%"


# -- report --------------------------------------------------------------------------------------------


def table(title: str, targets: list[Target]) -> None:
    print(f"\n{title}")
    head = "".join(f"{'c=' + str(c):>26}" for c in CONCURRENCY)
    print(f"  {'server':<38}{head}")
    for t in targets:
        cells = "".join(
            f"{t.results[c]['rps']:>9.0f}/s {t.results[c]['p50_ms']:5.2f}/{t.results[c]['p99_ms']:6.2f}ms"
            for c in CONCURRENCY
        )
        print(f"  {t.label:<38}{cells}")
    print(f"  {'':<38}{'(req/s  p50/p99)':>26}")


def ratios(label: str, ours: Target, base: Target, targets: dict[int, float] | None) -> list[bool]:
    """Throughput ratios against the targets (None, or a concurrency missing from them: for information),
    then the same comparison in server CPU per request."""
    verdicts = []
    cells = []
    cpu_cells = []
    for c in CONCURRENCY:
        ratio = ours.results[c]["rps"] / base.results[c]["rps"]
        if targets is None or c not in targets:
            cells.append(f"c={c}: {ratio:4.2f}x (info)          ")
        else:
            ok = ratio >= targets[c]
            verdicts.append(ok)
            cells.append(f"c={c}: {ratio:4.2f}x (>= {targets[c]:.2f} {'ok' if ok else 'MISSED'})")
        mine, theirs = ours.results[c]["cpu_us"], base.results[c]["cpu_us"]
        cpu_cells.append(f"c={c}: {mine:4.0f} vs {theirs:4.0f} us ({theirs / mine if mine else 0:4.2f}x)")
    print(f"  {label:<42} " + "   ".join(cells))
    print(f"  {'  server CPU per request':<42} " + "   ".join(cpu_cells))
    if all(t.results[c].get("tools_us", 0) >= 1 for c in CONCURRENCY for t in (ours, base)):
        # Where a spawning route's CPU goes: the machine's whole budget per request is the server's share plus
        # its tool processes' (and wrk's and the kernel's), and what it leaves idle is throughput not taken.
        cells = []
        for c in CONCURRENCY:
            mine, theirs = ours.results[c], base.results[c]
            cells.append(
                f"c={c}: {mine['tools_us']:4.0f} vs {theirs['tools_us']:4.0f} us, "
                f"idle {mine['idle'] * 100:2.0f} vs {theirs['idle'] * 100:2.0f}%"
            )
        print(f"  {'  tool processes CPU per request, idle':<42} " + "   ".join(cells))
    return verdicts


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    # This file is named http.py: drop its directory from the path, or `import http.client` (urllib, uvicorn)
    # would find this script instead of the standard library.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per wrk run (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best counts (default 3)")
    parser.add_argument("--only", choices=("exec", "fn", "light"), help="run one comparison only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.port)
        return
    for binary in ("wrk", "webhook"):
        if shutil.which(binary) is None and not Path(f"/usr/bin/{binary}").exists():
            raise SystemExit(f"{binary} is not installed (apt-get install {binary})")

    began = time.monotonic()
    print(f"load average before: {loadavg()}  ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="toolrun-bench-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        (work / "bench_fns.py").write_text(FNS)
        catalog = work / "tools.yaml"
        catalog.write_text(CATALOG)
        script = work / "post.lua"
        script.write_text(WRK_SCRIPT)
        get_script = work / "get.lua"
        get_script.write_text(GET_SCRIPT)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
        env["TOOLRUN_HOME"] = str(work / "home")

        def toolrun(workers: int | None) -> Server:
            # The defaults, access log included (to a file, as a deployment would keep it).
            port = free_port()
            argv = [TOOLRUN, "serve", "-c", str(catalog), "--port", str(port)]
            if workers is not None:
                argv += ["--workers", str(workers)]
            name = "toolrun" + (f" --workers {workers}" if workers else " (default workers)")
            log = stack.enter_context(open(work / f"toolrun-{workers or 0}.log", "wb"))
            return stack.enter_context(started(name, argv, env, port, stderr=log))

        def bare(kind: str) -> Server:
            port = free_port()
            argv = [PYTHON, __file__, "--child", kind, "--port", str(port)]
            return stack.enter_context(started(f"bare {kind}", argv, env, port))

        exec_targets: list[Target] = []
        fn_targets: list[Target] = []
        light_targets: list[Target] = []
        tr, tr1 = toolrun(None), toolrun(1)
        wait_until_serving(tr, "/tools/bench.echo", "hi")
        wait_until_serving(tr1, "/tools/bench.echo", "hi")
        if args.only in (None, "exec"):
            port = free_port()
            argv = ["webhook", "-hooks", str(webhook_hooks(work)), "-ip", "127.0.0.1", "-port", str(port)]
            wh = stack.enter_context(started("webhook", argv, env, port))
            wait_until_serving(wh, "/hooks/echo", "hi")
            spawn, pidfd = bare("spawn"), bare("spawn-pidfd")
            wait_until_serving(spawn, "/run", "hi")
            wait_until_serving(pidfd, "/run", "hi")
            exec_targets = [
                Target(tr, "/tools/bench.echo", "toolrun POST /tools/bench.echo"),
                Target(tr1, "/tools/bench.echo", "toolrun --workers 1"),
                Target(wh, "/hooks/echo", "webhook (Go)"),
                Target(spawn, "/run", "bare Starlette spawn"),
                Target(pidfd, "/run", "bare Starlette spawn + pidfd watcher"),
            ]
            print("\nexec: one sh -c per request")
            measure(exec_targets, args.duration, args.rounds, script)
        if args.only in (None, "fn"):
            js, jt = bare("json"), bare("json-thread")
            wait_until_serving(js, "/run", "hi")
            wait_until_serving(jt, "/run", "hi")
            wait_until_serving(tr1, "/tools/bench.fn_echo", "hi")
            fn_targets = [
                Target(tr1, "/tools/bench.fn_echo", "toolrun -w1 fn (def, thread pool)"),
                Target(tr1, "/tools/bench.afn_echo", "toolrun -w1 fn (async def)"),
                Target(js, "/run", "bare Starlette JSON route"),
                Target(tr1, "/tools/bench.ifn_echo", "toolrun -w1 fn (def, inline: true)"),
                Target(jt, "/run", "bare JSON route + thread handoff"),
                Target(tr, "/tools/bench.afn_echo", "toolrun fn (async def), default workers"),
            ]
            print("\nfn: no process")
            measure(fn_targets, args.duration, args.rounds, script)
        if args.only in (None, "light"):
            light = bare("light")
            _wait_get(light, "/healthz")
            light_targets = [
                Target(tr1, "/healthz", "toolrun -w1 GET /healthz"),
                Target(tr, "/healthz", "toolrun GET /healthz, default workers"),
                Target(light, "/healthz", "bare Starlette GET /healthz"),
                Target(tr1, "/tools/bench.echo", "toolrun -w1 GET /tools/{key}"),
                Target(tr, "/tools/bench.echo", "toolrun GET /tools/{key}, default workers"),
                Target(light, "/tools/bench.echo", "bare Starlette GET /tools/{key}"),
            ]
            print("\nlight: routes that spawn nothing (GET)")
            measure(light_targets, args.duration, args.rounds, get_script)

        print(f"\nload average after: {loadavg()}")
        if exec_targets:
            table("exec route (one sh -c per request)", exec_targets)
        if fn_targets:
            table("fn route (no process)", fn_targets)
        if light_targets:
            table("routes that spawn nothing", light_targets)

        print("\nratios (toolrun / baseline, requests per second)")
        if exec_targets:
            ours, ours1, wh_t, spawn_t, pidfd_t = exec_targets
            best = max((spawn_t, pidfd_t), key=lambda t: sum(t.results[c]["rps"] for c in CONCURRENCY))
            ratios("exec, default workers, vs webhook", ours, wh_t, {1: 0.8, 8: 1.1, 32: 1.1})
            ratios(
                f"exec -w1 vs best bare spawn ({best.label.split(' spawn')[1] or 'default'})".replace("( ", "("),
                ours1,
                best,
                dict.fromkeys(CONCURRENCY, 1.0),
            )
            ratios("exec -w1 vs webhook", ours1, wh_t, None)
            ratios("exec, default workers, vs -w1 (scaling)", ours, ours1, None)
        if fn_targets:
            ratios("fn (def) vs bare JSON route", fn_targets[0], fn_targets[2], dict.fromkeys(CONCURRENCY, 0.5))
            ratios("fn (async def) vs bare JSON route", fn_targets[1], fn_targets[2], dict.fromkeys(CONCURRENCY, 0.5))
            ratios("fn (def, inline) vs bare JSON route", fn_targets[3], fn_targets[2], dict.fromkeys(CONCURRENCY, 0.5))
            ratios("fn (def) vs bare route + thread handoff", fn_targets[0], fn_targets[4], None)
            ratios("fn (async def), default workers, vs bare", fn_targets[5], fn_targets[2], None)
        if light_targets:
            h1, hw, hb, t1, tw, tb = light_targets
            ratios("GET /healthz -w1 vs bare", h1, hb, {8: 0.8})
            ratios("GET /healthz, default workers, vs bare", hw, hb, None)
            ratios("GET /tools/{key} -w1 vs bare", t1, tb, {8: 0.8})
            ratios("GET /tools/{key}, default workers, vs bare", tw, tb, None)

        print("\nresident memory after the run")
        seen: set[int] = set()
        for target in exec_targets + fn_targets + light_targets:
            server = target.server
            if server.process.pid in seen:
                continue
            seen.add(server.process.pid)
            print(
                f"  {server.name:<38} {server.rss_kb / 1024:6.1f} MB"
                + (" per worker" if len(server.pids()) > 1 else "")
            )
    print(f"\ntotal bench time {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
