"""The floor of a Python server on the exec route (issue 40): how little CPU a Python process can spend on a call.

    .venv/bin/python bench/exec_floor.py                    # the floors, toolrun and webhook: about 2 minutes
    .venv/bin/python bench/exec_floor.py --sides toolrun,toolrun-uvloop   # toolrun's own loop, asyncio vs uvloop
    .venv/bin/python bench/exec_floor.py --duration 1 --rounds 1          # a smoke run

Each floor is a server written for this one job and nothing else: `POST /tools/echo` with the JSON body
{"msg": "hi"} runs `/bin/sh -c "printf '%s' 'hi'"` and answers its output. An asyncio protocol parses with
httptools (keep-alive; no pipelining, no body limit, no deadlines), the JSON is parsed with `json.loads`, the
child gets /dev/null, two pipes (stdout, stderr) and a session of its own, a pidfd tells of its exit, one
timer per call stands for the timeout, the pipes are read once after the exit (the output fits a pipe), and
the answer leaves in one write. It keeps none of toolrun's other guarantees (output caps, the disconnect kill,
the concurrency pool, audit, metrics, validation, templates): what it spends is below anything toolrun could.

The sides (`--sides`, comma-separated; webhook is always measured):
  floor-asyncio        the floor on asyncio's default loop, `os.posix_spawn` on the loop
  floor-uvloop         the same code on uvloop (`os.posix_spawn` still: libuv's own fork-based spawn is not used)
  floor-thread         asyncio's loop; the spawn (glibc's posix_spawn through ctypes, the GIL released) runs in
                       one of two threads, the pidfd comes back to the loop with call_soon_threadsafe
  floor-uvloop-thread  the same on uvloop
  toolrun              `toolrun serve` of this tree (default workers, access log on, to a file)
  toolrun-uvloop       the same with uvicorn's loop set to uvloop (toolrun's own spawn path unchanged)
  toolrun-threaded     `toolrun serve` with every spawn in its spawn threads (normally only from 64 running calls)
  toolrun-uvloop-threaded  both

Every server runs as many processes as toolrun's default workers (one per CPU; `--procs`), each with its own
listening socket on the port (SO_REUSEPORT, as toolrun's workers), so the comparison with webhook (one Go
process) is the one `make bench-exec` makes. Measured as `bench/exec_cpu.py` does: wrk at c=1, 8 and 32, the
sides alternated round by round, `--rounds` rounds; req/s is the best round, the server's CPU per call (all its
processes, the tools not counted) is summed over every round. uvloop must be installed for its sides
(`.venv/bin/pip install uvloop`: it is not a toolrun dependency). The load average is printed before and after.
It always exits 0.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from http_routes import (  # a sibling script, not a package
    CATALOG,
    CONCURRENCY,
    FNS,
    PYTHON,
    WRK_SCRIPT,
    Target,
    free_port,
    loadavg,
    run_wrk,
    started,
    wait_until_serving,
    webhook_hooks,
)

FLOORS = ("floor-asyncio", "floor-uvloop", "floor-thread", "floor-uvloop-thread")
TOOLRUNS = ("toolrun", "toolrun-uvloop", "toolrun-threaded", "toolrun-uvloop-threaded")
DEFAULT_SIDES = (*FLOORS, "toolrun")
SRC = Path(__file__).resolve().parent.parent / "src"
TIMEOUT = 60.0  # seconds: the floor's per-call timer (never fires here; it is there because toolrun's is)

# `toolrun serve` with uvicorn's loop set to uvloop, and/or every spawn sent to toolrun's spawn threads (normally
# from 64 running calls a process): patched before the server starts (workers are forked, so they inherit it).
# Everything else, the spawn itself included, is toolrun's own.
PATCHES = {
    "uvloop": "import toolrun.server.loop as loop; loop.server_loop = lambda: 'uvloop'; ",
    "threaded": "import toolrun.exec.executor as executor; executor.THREADED_FROM = 1; ",
}
RUN_TOOLRUN = (
    "import runpy, sys; sys.argv[0] = 'toolrun'; runpy.run_module('toolrun', run_name='__main__', alter_sys=True)"
)


# -- the floor server (run as `bench/exec_floor.py --child VARIANT --port N --procs P`) -----------------------


def floor_child(variant: str, port: int, procs: int) -> None:
    """Bind `procs` sockets (SO_REUSEPORT), fork a worker for each, wait for them (SIGTERM ends them all)."""
    import signal
    import socket

    sockets = []
    for _ in range(procs):  # one listening socket per worker, as toolrun's (server/workers.py, bind)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY by asyncio
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(2048)
        sock.setblocking(False)
        sockets.append(sock)
    pids = []
    for sock in sockets:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            floor_worker(variant, sock)
            os._exit(0)
        pids.append(pid)

    def stop(signum: int, frame: Any) -> None:
        for pid in pids:
            os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    for _ in pids:
        try:
            os.wait()
        except ChildProcessError:
            break


def floor_worker(variant: str, sock: Any) -> None:
    import asyncio

    if "uvloop" in variant:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    else:
        loop = asyncio.SelectorEventLoop()
    asyncio.set_event_loop(loop)
    spawner = ThreadSpawner(loop) if variant.endswith("thread") else InlineSpawner(loop)
    server = loop.run_until_complete(loop.create_server(lambda: FloorProtocol(spawner), sock=sock))
    try:
        loop.run_forever()
    finally:
        server.close()


class InlineSpawner:
    """posix_spawn on the loop's thread (it waits there until the child has exec'd: vfork)."""

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        self.env = {"PATH": "/usr/bin:/bin"}

    def run(self, argv: list[bytes], done: Any) -> None:
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        dup2 = os.POSIX_SPAWN_DUP2
        try:
            pid = os.posix_spawn(
                argv[0],
                argv,
                self.env,
                file_actions=[(dup2, self.devnull, 0), (dup2, out_w, 1), (dup2, err_w, 2)],
                setsid=True,
            )
        finally:
            os.close(out_w)
            os.close(err_w)
        self.watch(pid, os.pidfd_open(pid), out_r, err_r, done)

    def watch(self, pid: int, pidfd: int, out_r: int, err_r: int, done: Any) -> None:
        timer = self.loop.call_later(TIMEOUT, os.killpg, pid, 9)
        self.loop.add_reader(pidfd, self.exited, pid, pidfd, out_r, err_r, timer, done)

    def exited(self, pid: int, pidfd: int, out_r: int, err_r: int, timer: Any, done: Any) -> None:
        self.loop.remove_reader(pidfd)
        os.close(pidfd)
        timer.cancel()
        _, status = os.waitpid(pid, 0)
        out = os.read(out_r, 65536)
        err = os.read(err_r, 65536)
        os.close(out_r)
        os.close(err_r)
        done(out, err, os.waitstatus_to_exitcode(status))


class ThreadSpawner(InlineSpawner):
    """posix_spawn in one of two threads (glibc's, through ctypes: the GIL is released while it waits for the
    child's exec); the loop learns of the child with call_soon_threadsafe and watches its pidfd."""

    THREADS = 2

    def __init__(self, loop: Any) -> None:
        import ctypes
        import queue
        import threading

        super().__init__(loop)
        libc = ctypes.CDLL(None, use_errno=True)
        self.ctypes = ctypes
        self.spawn = libc.posix_spawn
        self.spawn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, *([ctypes.c_void_p] * 4)]
        self.libc = libc
        self.attr = ctypes.create_string_buffer(1024)
        libc.posix_spawnattr_init(self.attr)
        libc.posix_spawnattr_setflags(self.attr, ctypes.c_short(0x80))  # POSIX_SPAWN_SETSID
        self.c_env = (ctypes.c_char_p * 2)(b"PATH=/usr/bin:/bin", None)
        self.actions: dict[tuple[int, int], Any] = {}
        self.jobs: queue.SimpleQueue[tuple[list[bytes], Any]] = queue.SimpleQueue()
        for _ in range(self.THREADS):
            threading.Thread(target=self.serve, daemon=True).start()

    def run(self, argv: list[bytes], done: Any) -> None:
        self.jobs.put((argv, done))

    def file_actions(self, out_w: int, err_w: int) -> Any:
        actions = self.actions.get((out_w, err_w))
        if actions is None:  # the pipes' numbers recur: built once per pair
            actions = self.ctypes.create_string_buffer(1024)
            self.libc.posix_spawn_file_actions_init(actions)
            for target, fd in enumerate((self.devnull, out_w, err_w)):
                self.libc.posix_spawn_file_actions_adddup2(actions, fd, target)
            self.actions[out_w, err_w] = actions
        return actions

    def serve(self) -> None:
        ctypes = self.ctypes
        while True:
            argv, done = self.jobs.get()
            out_r, out_w = os.pipe2(os.O_CLOEXEC)
            err_r, err_w = os.pipe2(os.O_CLOEXEC)
            c_argv = (ctypes.c_char_p * (len(argv) + 1))(*argv, None)
            pid = ctypes.c_int()
            err = self.spawn(ctypes.byref(pid), argv[0], self.file_actions(out_w, err_w), self.attr, c_argv, self.c_env)
            os.close(out_w)
            os.close(err_w)
            if err:
                os.close(out_r)
                os.close(err_r)
                self.loop.call_soon_threadsafe(done, b"", os.strerror(err).encode(), 127)
                continue
            pidfd = os.pidfd_open(pid.value)
            self.loop.call_soon_threadsafe(self.watch, pid.value, pidfd, out_r, err_r, done)


class FloorProtocol:
    """HTTP/1.1 with httptools: one POST route, keep-alive, the answer in one write."""

    def __init__(self, spawner: InlineSpawner) -> None:
        import httptools

        self.spawner = spawner
        self.parser = httptools.HttpRequestParser(self)
        self.error = httptools.HttpParserError
        self.url = b""
        self.body: list[bytes] = []
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def eof_received(self) -> None:
        pass

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        pass

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except self.error:
            self.answer(400, b"bad request\n")
            self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url = url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        import json
        import shlex

        body, self.body = b"".join(self.body), []
        if self.url != b"/tools/echo":
            self.answer(404, b"not found\n")
            return
        try:
            msg = str(json.loads(body)["msg"])
        except (ValueError, KeyError, TypeError):
            self.answer(400, b"the body must be a JSON object with a msg\n")
            return
        command = ("printf '%s' " + shlex.quote(msg)).encode()
        self.spawner.run([b"/bin/sh", b"-c", command], self.finished)

    def finished(self, out: bytes, err: bytes, code: int) -> None:
        self.answer(200 if code == 0 else 500, out if code == 0 else err)

    def answer(self, status: int, body: bytes) -> None:
        if self.transport is None:  # the client left meanwhile
            return
        head = b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n\r\n" % (
            status,
            b"OK" if status == 200 else b"Error",
            len(body),
        )
        self.transport.write(head + body)


# -- the harness -------------------------------------------------------------------------------------------


def start_side(stack: ExitStack, side: str, work: Path, env: dict[str, str], procs: int) -> Target:
    port = free_port()
    if side in FLOORS:
        variant = side.removeprefix("floor-")
        argv = [PYTHON, __file__, "--child", variant, "--port", str(port), "--procs", str(procs)]
        server = stack.enter_context(started(side, argv, env, port))
        return Target(server, "/tools/echo", side)
    env = {**env, "PYTHONPATH": str(SRC)}
    serve = ["serve", "-c", str(work / "tools.yaml"), "--port", str(port), "--workers", str(procs)]
    patches = "".join(code for name, code in PATCHES.items() if name in side.split("-"))
    argv = [PYTHON, "-c", patches + RUN_TOOLRUN, *serve] if patches else [PYTHON, "-m", "toolrun", *serve]
    log = stack.enter_context((work / f"{side}.log").open("wb"))
    server = stack.enter_context(started(side, argv, env, port, stderr=log))
    return Target(server, "/tools/bench.echo", side)


def measure(targets: list[Target], seconds: float, rounds: int, script: Path) -> dict[str, dict[int, list[float]]]:
    """Each concurrency in turn, the sides alternated, `rounds` times: the best req/s of each counts; the CPU per
    call is summed over every round (CPU seconds / calls): [the server's, its tools', wrk's] per side and c."""
    cpu: dict[str, dict[int, list[float]]] = {t.label: {c: [0.0] * 4 for c in CONCURRENCY} for t in targets}
    for target in targets:
        run_wrk(target.url, 8, 1, script)  # warm-up
    for c in CONCURRENCY:
        for _ in range(rounds):
            for target in targets:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                result = run_wrk(target.url, c, seconds, script, target.server)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                wrk_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                sums = cpu[target.label][c]
                sums[0] += result["cpu_us"] * result["requests"]
                sums[1] += result["requests"]
                sums[2] += result["tools_us"] * result["requests"]
                sums[3] += wrk_s * 1e6
                best = target.results.get(c)
                if best is None or result["rps"] > best["rps"]:
                    target.results[c] = result
                if result["errors"] or result["non2xx"]:
                    print(f"  {target.label} c={c}: errors={result['errors']:.0f} non2xx={result['non2xx']:.0f}")
        print(f"  c={c} done, load average {loadavg()}", flush=True)
    return {
        label: {
            c: [server / max(1.0, n), tools / max(1.0, n), wrk / max(1.0, n)]
            for c, (server, n, tools, wrk) in by_c.items()
        }
        for label, by_c in cpu.items()
    }


def report(targets: list[Target], cpu: dict[str, dict[int, list[float]]]) -> None:
    """req/s and its ratio to webhook; CPU per call of the server, its tools and wrk; and the ratio a machine
    kept busy would give (webhook's whole CPU per call over the side's: server + tools + wrk)."""
    hook = targets[-1]
    cols = "".join(f"{'c=' + str(c):>12}" for c in CONCURRENCY)

    def rows(title: str, sides: list[Target], cell: Any) -> None:
        print(f"\n  {title:<30}{cols}")
        for t in sides:
            print(f"  {t.label:<30}" + "".join(cell(t, c) for c in CONCURRENCY))

    rows("POST, exec echo: req/s", targets, lambda t, c: f"{t.results[c]['rps']:>12.0f}")
    rows("req/s / webhook", targets[:-1], lambda t, c: f"{t.results[c]['rps'] / hook.results[c]['rps']:>11.2f}x")
    rows("server CPU per call, us", targets, lambda t, c: f"{cpu[t.label][c][0]:>12.0f}")
    rows("tools CPU per call, us", targets, lambda t, c: f"{cpu[t.label][c][1]:>12.0f}")
    rows("wrk CPU per call, us", targets, lambda t, c: f"{cpu[t.label][c][2]:>12.0f}")
    rows(
        "CPU-bound ratio to webhook",
        targets[:-1],
        lambda t, c: f"{sum(cpu[hook.label][c]) / max(1.0, sum(cpu[t.label][c])):>11.2f}x",
    )
    print("  (webhook's server + tools + wrk CPU per call over the side's: req/s / webhook on a machine kept busy)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per wrk run (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (default 3)")
    parser.add_argument("--sides", default=",".join(DEFAULT_SIDES), help="comma-separated (default: %(default)s)")
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 1, help="processes per server (default: CPUs)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        floor_child(args.child, args.port, args.procs)
        return
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = [s for s in sides if s not in (*FLOORS, *TOOLRUNS)]
    if unknown:
        raise SystemExit(f"unknown side(s) {', '.join(unknown)}: choose from {', '.join((*FLOORS, *TOOLRUNS))}")
    if any("uvloop" in s for s in sides):
        try:
            import uvloop  # noqa: F401
        except ImportError:
            raise SystemExit("the uvloop sides need uvloop: .venv/bin/pip install uvloop") from None
    for binary in ("wrk", "webhook"):
        if shutil.which(binary) is None:
            raise SystemExit(f"{binary} is not installed (apt-get install {binary})")
    began = time.monotonic()
    print(f"load average before: {loadavg()}  ({os.cpu_count()} CPUs, {args.procs} processes per server)")
    with tempfile.TemporaryDirectory(prefix="toolrun-bench-floor-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        (work / "bench_fns.py").write_text(FNS)
        (work / "tools.yaml").write_text(CATALOG)
        script = work / "post.lua"
        script.write_text(WRK_SCRIPT)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SVC_", "TOOLRUN_"))}
        env["TOOLRUN_HOME"] = str(work / "home")
        targets = [start_side(stack, side, work, env, args.procs) for side in sides]
        port = free_port()
        argv = ["webhook", "-hooks", str(webhook_hooks(work)), "-ip", "127.0.0.1", "-port", str(port)]
        hook = stack.enter_context(started("webhook", argv, env, port))
        targets.append(Target(hook, "/hooks/echo", "webhook (Go)"))
        for target in targets:
            wait_until_serving(target.server, target.path, "hi")
        cpu = measure(targets, args.duration, args.rounds, script)
        print(f"load average after: {loadavg()}\n")
        report(targets, cpu)
    print(f"\ntotal bench time {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
