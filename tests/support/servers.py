"""Real processes for the tests and the bench/ scripts: free ports, start, wait until ready, stop, logs.

`RedisServer`, `ToolrunServer` and `Nginx` start `redis-server`, `toolrun serve` and nginx on free loopback ports,
wait for them with a deadline (never a bare sleep) and always stop them: use them as context
managers, or register them on a `Processes` (an ExitStack that stops everything it started, in
reverse order, even when a test fails). Each keeps its output in a log file in its work dir.

The MCP tests' own `toolrun serve` (`ServeProcess`) is in support.mcp; what is left of a tool's
processes, read from /proc, in support.procs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx

from .catalogs import write_catalog

T = TypeVar("T")
START_TIMEOUT = 30.0  # a cold `toolrun serve` imports starlette, uvicorn and mcp: ~1 s, more on a busy CI box
TOOLRUN = str(Path(sys.executable).with_name("toolrun"))  # the installed console script


def _port_range() -> range:
    """12,000 ports just below the kernel's ephemeral range: the kernel never hands one of them to a client
    socket (or to a `bind(0)`), so a port chosen here stays free until its server binds it."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return range(max(1024, low - 12000), low)


PORTS = _port_range()
# Every test process (each pytest-xdist worker, each checkout's run) reserves the ports it hands out with a
# POSIX lock on that port's byte of this file: the kernel drops the locks when the process ends.
PORT_LOCKS = Path(tempfile.gettempdir()) / "toolrun-test-ports.lock"
_port_locks: list[int] = []  # the lock file's descriptor, opened once
_handed: set[int] = set()  # a process's own locks never conflict with each other: it remembers what it handed


def _locks_fd() -> int:
    if not _port_locks:
        fd = os.open(PORT_LOCKS, os.O_RDWR | os.O_CREAT, 0o666)
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # another user's run on the same machine takes ports too
        _port_locks.append(fd)
    return _port_locks[0]


def free_port() -> int:
    """A loopback port for a test server that no other test process hands out while this one lives, and
    that nothing listens on now: tests run side by side (`make test` runs them in pytest-xdist workers)."""
    fd = _locks_fd()
    for _ in range(2000):
        port = random.choice(PORTS)
        if port in _handed:
            continue
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
        except OSError:
            continue  # another test process has it
        _handed.add(port)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # something outside the tests listens there (or it is in TIME_WAIT): keep it reserved
        return port
    raise RuntimeError(f"no free port left in {PORTS.start}-{PORTS.stop - 1} (locks in {PORT_LOCKS})")


def wait_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.02) -> T:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def clean_env(home: Path, settings: Mapping[str, Any] | None = None) -> dict[str, str]:
    """This environment without any SVC_* setting, with its own TOOLRUN_HOME, plus `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    env["TOOLRUN_HOME"] = str(home)
    env.pop("TOOLRUN_API_KEY", None)
    # The test extra installs toolrun[semantic]: servers rank lexically (no model process) unless a test asks
    env["SVC_SEARCH_SEMANTIC"] = "false"
    for name, value in (settings or {}).items():
        env[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


def toolrun_cli(*args: str, env: Mapping[str, str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run the real `toolrun` command (as `python -m toolrun`) and return its result."""
    return subprocess.run(
        [sys.executable, "-m", "toolrun", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


SETPRIV = shutil.which("setpriv")  # util-linux
_spawner: list[ThreadPoolExecutor] = []
_spawner_lock = threading.Lock()


def with_parent_death(argv: list[str], signame: str = "KILL") -> list[str]:
    """`argv` run so that the kernel sends it SIG`signame` when the process that started it dies (setpriv
    --pdeathsig, a prctl kept across exec): a pytest killed mid-test (a timeout, Ctrl-C twice, an xdist worker
    that crashed) leaves no server behind, which would otherwise live on (one did for 81 minutes)."""
    return [SETPRIV, f"--pdeathsig={signame}", "--", *argv] if SETPRIV else argv


def spawn_from_a_lasting_thread(start: Callable[[], T]) -> T:
    """`start()` (a Popen) from a thread that lives as long as this process: the kernel's "parent" of a parent-death
    signal is the thread that forked, so a child started from a short-lived thread (a test's thread pool) would get
    the signal when that thread ends. The main thread and one spawner thread last."""
    if threading.current_thread() is threading.main_thread():
        return start()
    with _spawner_lock:
        if not _spawner:
            _spawner.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-spawner"))
    return _spawner[0].submit(start).result()


class Process:
    """A child in its own session, its output in `log_path`; `stop()` never waits unboundedly; it dies with the
    process that started it (`with_parent_death`)."""

    name = "process"
    log_mode = "ab"  # a restart appends to the log of the run before
    death_signal = "KILL"  # sent when the test process that started it dies

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{self.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} is not started"
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self, argv: list[str], env: Mapping[str, str] | None = None, in_workdir: bool = True) -> None:
        """Start `argv` in the work dir (`in_workdir=False`: in this process's own directory), to die with this
        process (`with_parent_death`)."""
        assert not self.alive(), f"{self.name} already runs"
        with open(self.log_path, self.log_mode) as log:
            self.proc = spawn_from_a_lasting_thread(
                lambda: subprocess.Popen(
                    with_parent_death(argv, self.death_signal),
                    cwd=self.workdir if in_workdir else None,
                    env=dict(env) if env is not None else None,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def send(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
        """Signal, wait up to `timeout`, then SIGKILL the whole session; the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            return self.proc.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
            return None

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RedisServer(Process):
    """A throwaway redis-server on 127.0.0.1: no snapshots, no AOF, its files in `workdir`.

    `stop(save=True)` is a clean `SHUTDOWN SAVE`, so `start()` on the same port brings the data back
    (a maintenance restart); `freeze()` / `thaw()` stop and continue it (a Redis that hangs).
    """

    name = "redis"

    def __init__(self, workdir: Path, binary: str = "redis-server", port: int | None = None) -> None:
        super().__init__(workdir)
        self.binary = binary
        self.port = port or free_port()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 15.0) -> RedisServer:
        argv = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(self.workdir), "--dbfilename", "dump.rdb", "--daemonize", "no", "--loglevel", "warning"]
        self.spawn(argv)
        try:
            wait_until(lambda: self.ping() or self._died(), timeout, f"redis-server on port {self.port}")
        except TimeoutError:
            self.stop()
            raise
        if not self.alive():
            raise RuntimeError(f"redis-server exited:\n{self.log()[-2000:]}")
        return self

    def _died(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def command(self, *words: str, timeout: float = 1.0) -> bytes:
        """Send one inline command, return the raw reply (b'' when nothing answers)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
                sock.sendall((" ".join(words) + "\r\n").encode())
                return sock.recv(65536)
        except OSError:
            return b""

    def ping(self) -> bool:
        return self.command("PING", timeout=0.5).startswith(b"+PONG")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0, save: bool = False) -> int | None:
        if save and self.alive():
            self.command("SHUTDOWN", "SAVE", timeout=5.0)
        self.send(signal.SIGCONT)  # a frozen server cannot act on SIGTERM
        return super().stop(sig, timeout)

    def freeze(self) -> None:
        self.send(signal.SIGSTOP)

    def thaw(self) -> None:
        self.send(signal.SIGCONT)


class ToolrunServer(Process):
    """`toolrun serve -c <catalog> [args]` on a free port with `settings` as SVC_* environment variables (any other
    name too: `{"TOOLRUN_UI_DIST": ...}`); the one way the tests start a server process (support.mcp's
    `ServeProcess` is one with the MCP tests' environment)."""

    name = "toolrun"

    def __init__(
        self,
        workdir: Path,
        catalog: Path,
        settings: Mapping[str, Any] | None = None,
        port: int | None = None,
        home: Path | None = None,
        args: Sequence[str] = (),
    ) -> None:
        super().__init__(workdir)
        self.catalog = catalog
        self.port = port or free_port()
        self.home = home or workdir / "home"
        self.env = clean_env(self.home, settings)
        self.args = list(args)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> ToolrunServer:
        """Start without waiting (see `ready`), so several servers can start side by side."""
        argv = [sys.executable, "-m", "toolrun", "serve", "-c", str(self.catalog), "--host", "127.0.0.1"]
        self.spawn([*argv, "--port", str(self.port), *self.args], self.env)
        return self

    def ready(self, timeout: float = START_TIMEOUT) -> ToolrunServer:
        def up() -> bool:
            if not self.alive():
                raise RuntimeError(f"toolrun serve exited with {self.proc and self.proc.returncode}:\n{self.log()}")
            try:
                return client.get(self.url + "/healthz").status_code == 200
            except httpx.HTTPError:
                return False

        with httpx.Client(timeout=1.0) as client:
            try:
                wait_until(up, timeout, f"toolrun serve on port {self.port}", interval=0.05)
            except TimeoutError:
                raise TimeoutError(f"toolrun serve on port {self.port} not up in {timeout}s:\n{self.log()}") from None
        return self

    def start(self, timeout: float = START_TIMEOUT) -> ToolrunServer:
        return self.launch().ready(timeout)

    def rss_kib(self) -> int:
        from .procs import status_kib  # procs waits with wait_until from here

        return status_kib(self.pid, "VmRSS")


def serve_catalog(
    directory: Path, text: str, settings: Mapping[str, Any] | None = None, name: str = "srv", **kwargs: Any
) -> ToolrunServer:
    """A `ToolrunServer` (not started) of the catalog `text`, written to `directory`/tools.yaml, its work dir
    `directory`/`name` (`kwargs`: `port`, `home`)."""
    return ToolrunServer(directory / name, write_catalog(directory, text), settings, **kwargs)


NGINX_CONF = """\
daemon off;
{user}
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream toolrun {{
{servers}
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://toolrun;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_buffering off;  # event streams (GET /mcp) pass at once
        }}
    }}
}}
"""


class Nginx(Process):
    """nginx in the foreground (`daemon off;`), every path inside its work dir: a round robin over `upstreams`."""

    name = "nginx"
    death_signal = "TERM"  # its master stops its workers on SIGTERM; a SIGKILLed master would leave them

    def __init__(self, workdir: Path, upstreams: list[int]) -> None:
        super().__init__(workdir)
        self.port = free_port()
        servers = "\n".join(f"        server 127.0.0.1:{p};" for p in upstreams)
        user = "user root;" if os.geteuid() == 0 else ""
        conf = NGINX_CONF.format(dir=workdir, servers=servers, port=self.port, user=user)
        self.conf = workdir / "nginx.conf"
        self.conf.write_text(conf, encoding="utf-8")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> Nginx:
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        self.spawn([binary, "-c", str(self.conf), "-p", str(self.workdir), "-e", str(self.workdir / "error.log")])

        def up() -> bool:
            if not self.alive():
                raise RuntimeError(f"nginx exited:\n{self.log()}\n{(self.workdir / 'error.log').read_text()}")
            try:
                return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, timeout, "nginx", interval=0.05)
        return self


class Processes(contextlib.ExitStack):
    """Stops every process added to it, however the block ends: SIGTERM to all of them at once
    (toolrun servers first, so none of them waits on a Redis that is already gone), then waits."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[Process] = []
        self.callback(self._stop_all)

    def add(self, process: Any) -> Any:
        self.started.append(process)
        return process

    def _stop_all(self) -> None:
        order = sorted(self.started, key=lambda p: isinstance(p, RedisServer))
        for process in order:
            if not isinstance(process, RedisServer):
                process.send(signal.SIGTERM)
        for process in order:
            process.stop()


def start_all(*servers: ToolrunServer, timeout: float = START_TIMEOUT) -> None:
    """Launch several servers at once and wait for all of them (imports overlap on 2 cores)."""
    for server in servers:
        server.launch()
    for server in servers:
        server.ready(timeout)
