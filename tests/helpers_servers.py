"""Real processes for the scale-out, reliability and hostile-input tests (and bench/scale.py).

`RedisServer` and `ToolrunServer` start `redis-server` and `toolrun serve` on free loopback ports,
wait for them with a deadline (never a bare sleep) and always stop them: use them as context
managers, or register them on a `Processes` (an ExitStack that stops everything it started, in
reverse order, even when a test fails). Each keeps its output in a log file in its work dir.

`pids_matching(marker)` / `zombies()` read /proc, so a test can prove that nothing a tool
started survives (put a unique marker in the tool's command line).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 30.0  # a cold `toolrun serve` imports starlette, uvicorn and mcp: ~1 s, more on a busy CI box
JSON = {"content-type": "application/json"}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def create_key(env: Mapping[str, str], username: str, *groups: str) -> str:
    """A fresh API key from `toolrun keys create` (into whatever store `env` selects)."""
    flags = [f"--group={g}" for g in groups]
    done = toolrun_cli("keys", "create", username, *flags, env=env)
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip()
    assert key.startswith("trk_"), done.stdout
    return key


async def raw_call(
    port: int, method: str, path: str, body: bytes = b"", headers: Mapping[str, str] | None = None
) -> tuple[int, dict[str, str], bytes, float]:
    """One HTTP/1.1 request on its own connection, with almost no client-side cost (a load test's
    client must not be its bottleneck): (status, headers, body, seconds). `Connection: close`."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        if body or method == "POST":
            head += f"Content-Length: {len(body)}\r\n"
        writer.write(head.encode() + b"\r\n" + body)
        answer = await reader.read(-1)
    finally:
        writer.close()
    took = time.perf_counter() - started
    raw_head, _, content = answer.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines[0].startswith("HTTP/1.1 ") else 0
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, fields, content, took


class Process:
    """A child in its own session, its output in `log_path`; `stop()` never waits unboundedly."""

    name = "process"

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

    def spawn(self, argv: list[str], env: Mapping[str, str] | None = None) -> None:
        assert not self.alive(), f"{self.name} already runs"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.workdir,
                env=dict(env) if env is not None else None,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
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
    """`toolrun serve -c <catalog>` on a free port with `settings` as SVC_* environment variables."""

    name = "toolrun"

    def __init__(
        self,
        workdir: Path,
        catalog: Path,
        settings: Mapping[str, Any] | None = None,
        port: int | None = None,
        home: Path | None = None,
    ) -> None:
        super().__init__(workdir)
        self.catalog = catalog
        self.port = port or free_port()
        self.home = home or workdir / "home"
        self.env = clean_env(self.home, settings)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> ToolrunServer:
        """Start without waiting (see `ready`), so several servers can start side by side."""
        argv = [sys.executable, "-m", "toolrun", "serve", "-c", str(self.catalog), "--host", "127.0.0.1"]
        self.spawn([*argv, "--port", str(self.port)], self.env)
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
        return status_kib(self.pid, "VmRSS")


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


# -- /proc ---------------------------------------------------------------------------------------


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def pids_matching(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `marker`."""
    found = []
    needle = marker.encode()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        if needle in _read(f"/proc/{entry}/cmdline").replace(b"\0", b" "):
            found.append(int(entry))
    return found


def pids_with_env(name: str, value: str) -> list[int]:
    """Live processes whose environment holds `name=value`: every descendant of a tool whose
    catalog sets it (zombies have no environment left: see `zombies`)."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and needle in _read(f"/proc/{entry}/environ").split(b"\0"):
            found.append(int(entry))
    return found


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a process, or None when it no longer exists."""
    raw = _read(f"/proc/{pid}/stat")
    if not raw:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1])


def zombies(among: Iterator[int] | list[int] | set[int] | None = None) -> list[tuple[int, int]]:
    """(pid, parent pid) of zombies, among `among` or the whole system."""
    pids = among if among is not None else [int(e) for e in os.listdir("/proc") if e.isdigit()]
    result = []
    for pid in pids:
        stat = proc_stat(pid)
        if stat is not None and stat[0] == "Z":
            result.append((pid, stat[1]))
    return result


def status_kib(pid: int, field: str) -> int:
    for line in _read(f"/proc/{pid}/status").decode().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(f"{field} of pid {pid}")


def gone(pids: list[int] | set[int], timeout: float) -> list[tuple[int, str, int]]:
    """Wait up to `timeout` for `pids` to vanish (zombies reparented to init are reaped by it);
    return what is left as (pid, state, parent pid)."""

    def left() -> list[tuple[int, str, int]]:
        return [(p, s[0], s[1]) for p in pids if (s := proc_stat(p)) is not None]

    with contextlib.suppress(TimeoutError):
        wait_until(lambda: not left(), timeout, "processes to exit", interval=0.05)
    return left()
