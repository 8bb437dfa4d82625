"""Reliability of a real `toolrun serve`: graceful shutdown, load, slow clients and hostile tools.

Every tool of the catalog runs with TOOLRUN_TEST_MARK=<a fresh uuid> in its environment, so any
process a tool started, however deep, is found in /proc (`pids_with_env`): the tests prove that
none survives its call, its timeout or the server's shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from support.catalogs import write_catalog
from support.http import JSON, raw_call
from support.procs import gone, pids_with_env, proc_stat, status_kib, zombies
from support.servers import Processes, ToolrunServer, start_all, wait_until

# The tests that time the server under load (a deadline, a percentile, /healthz's latency) are `serial`: `make test`
# runs them alone, after the rest. The others (what is left of a tool, memory) run side by side with the suite.

MARK = uuid.uuid4().hex
MARK_VAR = "TOOLRUN_TEST_MARK"

CATALOG = f"""\
version: 1
group: rel
defaults:
  env:
    {MARK_VAR}: {MARK}
tools:
  - name: sleep
    public: true
    description: Sleep, then say so.
    exec: sleep {{{{ seconds }}}} && printf 'slept %s' {{{{ seconds }}}}
    params:
      - name: seconds
        type: float
  - name: echo
    public: true
    description: Print a message back.
    exec: printf '%s' {{{{ msg | quote }}}}
    params:
      - name: msg
        type: str
  - name: orphans
    public: true
    description: Leaves a background child and a pipeline behind, and times out.
    exec: sleep 300 & sleep 301 | cat
    timeout: 0.2
  - name: forks
    public: true
    description: Starts 200 background sleeps and waits for them; times out.
    exec: for i in $(seq 200); do sleep 300 & done; wait
    timeout: 0.5
  - name: flood
    public: true
    description: Floods stdout and stderr for two seconds.
    exec: timeout 2 yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx >&2 & timeout 2 yes; wait; exit 0
    timeout: 10
    limits:
      output: 1M
  - name: hog
    public: true
    description: Asks for 2 GiB of memory.
    exec: {sys.executable} -c 'b = bytearray(2 << 30); print(len(b))'
    limits:
      memory: 256M
"""


def survivors() -> list[int]:
    return pids_with_env(MARK_VAR, MARK)


def assert_no_survivors(timeout: float = 5.0) -> None:
    """Nothing a tool started is alive (a killed tool's orphans are zombies for init to reap)."""
    with contextlib.suppress(TimeoutError):
        wait_until(lambda: not survivors(), timeout, "tool processes to exit")
    assert survivors() == []


def sleeping_tools() -> list[int]:
    return [p for p in survivors() if (s := proc_stat(p)) is not None and s[0] != "Z"]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("reliability")
    return write_catalog(directory, CATALOG)


@pytest.fixture(scope="module")
def server(catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolrunServer]:
    """One server for the load and tool-fault tests: 2 s for a request head and body."""
    settings = {"SVC_REQUEST_TIMEOUT": 2, "SVC_LOG_LEVEL": "warning"}
    with Processes() as procs:
        yield procs.add(ToolrunServer(tmp_path_factory.mktemp("server"), catalog, settings)).start()


def post(client: httpx.Client, server: ToolrunServer, tool: str, body: dict[str, object]) -> httpx.Response:
    return client.post(f"{server.url}/tools/{tool}", content=json.dumps(body), headers=JSON)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- graceful shutdown ----------------------------------------------------------------------------


def _connect_refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except (ConnectionRefusedError, ConnectionResetError):  # reset: caught in the closing backlog
        return True
    return False


def _call_in_background(server: ToolrunServer, seconds: float) -> tuple[threading.Thread, dict[str, object]]:
    outcome: dict[str, object] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            with httpx.Client(timeout=60) as client:
                outcome["response"] = post(client, server, "rel.sleep", {"seconds": seconds})
        except httpx.HTTPError as exc:
            outcome["error"] = exc
        outcome["took"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_until(sleeping_tools, 10, "the tool call to start")
    return thread, outcome


@pytest.mark.serial
def test_sigterm_lets_an_in_flight_call_finish_and_kills_one_past_the_grace(catalog: Path, tmp_path: Path) -> None:
    with Processes() as procs:
        patient = procs.add(ToolrunServer(tmp_path / "patient", catalog, {"SVC_SHUTDOWN_GRACE": 3}))
        hasty = procs.add(ToolrunServer(tmp_path / "hasty", catalog, {"SVC_SHUTDOWN_GRACE": 1}))
        start_all(patient, hasty)

        # 1. A 1.5 s call in flight when SIGTERM arrives: the server stops accepting at once, the
        #    call finishes with its 200, then the server exits.
        thread, outcome = _call_in_background(patient, 1.5)
        tools = sleeping_tools()
        signalled = time.monotonic()
        patient.send(signal.SIGTERM)
        wait_until(lambda: _connect_refused(patient.port), 1.0, "the listening socket to close")
        thread.join(10)
        response = outcome.get("response")
        assert isinstance(response, httpx.Response), outcome
        assert (response.status_code, response.text) == (200, "slept 1.5")
        patient.wait(5)
        assert time.monotonic() - signalled < 3.0, "the call should end well within the 3 s grace"
        assert gone(tools, 5) == []

        # 2. A 30 s call outlives the 1 s grace: the server cancels it, which kills the tool's
        #    process group, and exits; nothing of the tool survives, no zombie is left behind.
        thread, outcome = _call_in_background(hasty, 30)
        tools = sleeping_tools()
        signalled = time.monotonic()
        hasty.send(signal.SIGTERM)
        wait_until(lambda: _connect_refused(hasty.port), 1.0, "the listening socket to close")
        hasty.wait(10)
        exited = time.monotonic() - signalled
        thread.join(10)
        assert not thread.is_alive()
        assert exited < 1 + 2.0, f"server took {exited:.1f}s to exit with a 1 s grace"
        response = outcome.get("response")
        assert response is None or (isinstance(response, httpx.Response) and response.status_code != 200)
        assert gone(tools, 10) == [], "tool processes (or zombies) outlived the server"
        assert survivors() == []
        assert "timeout graceful shutdown exceeded" in hasty.log()


# -- load -----------------------------------------------------------------------------------------


@pytest.mark.serial
def test_200_concurrent_one_second_calls_all_succeed_and_run_side_by_side(
    server: ToolrunServer, record_property: pytest.RecordProperty
) -> None:
    """Each call on its own connection, from a client that costs next to nothing (`raw_call`).

    The speed target (p99 under 1.3 s on 2 cores) is a benchmark figure: bench/load.py measures it.
    Here the bound only proves the calls ran side by side (one after another would take 200 s).
    """

    async def run() -> list[tuple[int, dict[str, str], bytes, float]]:
        warm = b'{"seconds": 0.01}'  # a freshly started server compiles and imports on its first calls
        await asyncio.gather(*(raw_call(server.port, "POST", "/tools/rel.sleep", warm, JSON) for _ in range(20)))
        body = b'{"seconds": 1}'
        return await asyncio.gather(
            *(raw_call(server.port, "POST", "/tools/rel.sleep", body, JSON) for _ in range(200))
        )

    results = asyncio.run(run())
    assert [(status, text) for status, _, text, _ in results] == [(200, b"slept 1.0")] * 200
    latencies = [took for *_, took in results]
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    record_property("sleep1_x200_p99", round(p99, 3))
    print(f"\n200 x sleep 1: p50 {p50:.3f}s p99 {p99:.3f}s max {max(latencies):.3f}s")
    assert p99 < 3.0, f"p99 {p99:.3f}s: the calls did not run side by side"
    assert_no_survivors()


class HealthProbe:
    """Polls /healthz from its own thread and connection while the test does something else."""

    def __init__(self, url: str, every: float = 0.02) -> None:
        self.url = url
        self.every = every
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=5) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    response = client.get(self.url + "/healthz")
                    if response.status_code != 200:
                        self.failures.append(f"status {response.status_code}")
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                self.latencies.append(time.perf_counter() - started)
                self._stop.wait(self.every)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.mark.serial
def test_1000_concurrent_posts_all_get_well_formed_answers_and_healthz_stays_prompt(
    server: ToolrunServer, record_property: pytest.RecordProperty
) -> None:
    async def run() -> list[tuple[int, dict[str, str], bytes, float]]:
        return await asyncio.gather(
            *(raw_call(server.port, "POST", "/tools/rel.echo", b'{"msg": "m%d"}' % i, JSON) for i in range(1000))
        )

    with HealthProbe(server.url) as probe:
        started = time.perf_counter()
        results = asyncio.run(run())
        took = time.perf_counter() - started
    overloaded = 0
    for i, (status, headers, body, _) in enumerate(results):
        if status == 503:  # the documented overload answer: over max_concurrent_calls (256)
            overloaded += 1
            assert headers["retry-after"] == "1"
            assert headers["content-type"].startswith("text/plain")
            # (256 in all: with several workers each one runs its share and names it)
            assert body.startswith(b"Overloaded: server busy: "), body
            assert b"tool processes already running" in body, body
        else:
            assert (status, body) == (200, b"m%d" % i)
    worst = max(probe.latencies)
    record_property("healthz_max_under_1000_posts", round(worst, 3))
    print(f"\n1000 POSTs in {took:.2f}s, {overloaded} overloaded; /healthz x{len(probe.latencies)} max {worst:.3f}s")
    assert probe.failures == []
    assert len(probe.latencies) >= 3
    assert worst < 1.0, f"/healthz took {worst:.3f}s"
    assert_no_survivors()


def _read_status(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0]


@pytest.mark.serial
def test_50_stalled_slow_clients_do_not_stop_healthz_and_are_cut_off_at_request_timeout(
    server: ToolrunServer,
) -> None:
    """Half a request head, or a head announcing 1000 bytes of body and sending 10, or nothing at all:
    /healthz and calls keep answering at once, and each stalled client gets a 408 (or, having sent
    nothing, a closed connection) once `request_timeout` (2 s here) has passed."""
    head = b"POST /tools/rel.echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    half_heads, short_bodies, silent = [], [], []
    try:
        started = time.perf_counter()
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(head[:40])
            half_heads.append(sock)
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(head + b"Content-Length: 1000\r\n\r\n" + b'{"msg": "x')
            short_bodies.append(sock)
        for _ in range(10):
            silent.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
        with httpx.Client(timeout=5) as client:
            latencies = []
            for _ in range(20):
                before = time.perf_counter()
                assert client.get(server.url + "/healthz").json() == {"status": "ok"}
                latencies.append(time.perf_counter() - before)
                assert post(client, server, "rel.echo", {"msg": "still here"}).text == "still here"
        assert max(latencies) < 1.0, latencies
        assert {_read_status(sock) for sock in half_heads} == {b"HTTP/1.1 408 Request Timeout"}
        assert {_read_status(sock) for sock in short_bodies} == {b"HTTP/1.1 408 Request Timeout"}
        assert {sock.recv(100) for sock in silent} == {b""}  # closed without a word
        assert time.perf_counter() - started < 2 + 3
    finally:
        for sock in half_heads + short_bodies + silent:
            sock.close()


@pytest.mark.serial
def test_a_later_head_that_stalls_on_a_kept_alive_connection_gets_a_408_at_request_timeout(
    server: ToolrunServer,
) -> None:
    """The head deadline holds for every request of a connection, not only its first: a second head that
    stops half-way gets its 408 once `request_timeout` (2 s) has passed, whether it began in the packet
    that finished the first request (pipelined) or in a packet of its own."""
    first = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    half = b"GET /healthz HTTP/1.1\r\nHost: 127."

    def stall(pipelined: bool) -> tuple[bytes, float]:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            started = time.perf_counter()
            if pipelined:
                sock.sendall(first + half)
            else:
                sock.sendall(first)
                answer = sock.recv(4096)
                while not answer.endswith(b'{"status":"ok"}') and (more := sock.recv(4096)):
                    answer += more  # the head and the body may come in two segments (the `coalesce` trick off)
                assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b'{"status":"ok"}'), answer
                sock.sendall(half)
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
            return answer, time.perf_counter() - started

    with ThreadPoolExecutor(2) as pool:  # both connections at once: each waits out its own deadline
        outcomes = dict(zip((True, False), pool.map(stall, (True, False)), strict=True))
    for pipelined, (answer, waited) in outcomes.items():
        assert answer.endswith(b"request head not received within 2 seconds"), (pipelined, answer)
        assert b"HTTP/1.1 408 Request Timeout" in answer, (pipelined, answer)
        assert answer.startswith(b"HTTP/1.1 200 OK") or not pipelined, answer
        assert 1.9 < waited < 2 + 2, (pipelined, waited)


# -- faults in tools ------------------------------------------------------------------------------


def test_1000_timed_out_calls_leaving_background_children_leave_zero_processes(server: ToolrunServer) -> None:
    """`sleep 300 & sleep 301 | cat` with a 0.2 s timeout, 50 calls at a time."""

    async def run() -> list[tuple[int, dict[str, str], bytes, float]]:
        semaphore = asyncio.Semaphore(50)

        async def one() -> tuple[int, dict[str, str], bytes, float]:
            async with semaphore:
                return await raw_call(server.port, "POST", "/tools/rel.orphans", b"", JSON)

        return await asyncio.gather(*(one() for _ in range(1000)))

    results = asyncio.run(run())
    assert {(status, body) for status, _, body, _ in results} == {(200, b"(-1, '', 'timeout after 0.2s')")}
    assert survivors() == []  # the group was killed before each answer
    # the server reaped every shell it started (the tools' orphans are init's to reap)
    assert [pid for pid, parent in zombies() if parent == server.pid] == []


def test_a_fork_heavy_tool_dies_whole_at_its_timeout(server: ToolrunServer) -> None:
    """`limits.processes` (RLIMIT_NPROC) does not bind root; the process group kill does."""
    with httpx.Client(timeout=30) as client:
        for _ in range(3):
            response = post(client, server, "rel.forks", {})
            assert (response.status_code, response.text) == (200, "(-1, '', 'timeout after 0.5s')")
            assert survivors() == []


def test_a_tool_flooding_stdout_and_stderr_costs_the_server_no_memory(
    server: ToolrunServer, record_property: pytest.RecordProperty
) -> None:
    with httpx.Client(timeout=30) as client:
        post(client, server, "rel.echo", {"msg": "warm"})
        before = server.rss_kib()

        async def two_floods() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=30) as aclient:
                url = f"{server.url}/tools/rel.flood"
                return await asyncio.gather(*(aclient.post(url, headers=JSON) for _ in range(2)))

        responses = asyncio.run(two_floods())
    after, peak = server.rss_kib(), status_kib(server.pid, "VmHWM")
    for response in responses:
        assert response.status_code == 200
        text = response.text
        assert text.startswith("y\ny\ny\n") and text.endswith("y\ny\n")  # the head and the tail are kept
        assert "[toolrun: stdout truncated: kept the first 524288 and the last 524288 bytes, dropped " in text
        assert 1024 * 1024 <= len(text) < 1024 * 1024 + 200
    growth = (after - before) / 1024
    record_property("flood_rss_growth_mib", round(growth, 1))
    print(f"\nflood: RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB (peak {peak / 1024:.1f} MiB)")
    assert growth < 50, f"RSS grew by {growth:.1f} MiB"
    assert survivors() == []


def test_a_memory_hungry_tool_is_stopped_by_its_memory_limit(server: ToolrunServer) -> None:
    with httpx.Client(timeout=30) as client:
        response = post(client, server, "rel.hog", {})
    assert response.status_code == 200
    assert response.text.startswith("(1, '', ") and "MemoryError" in response.text, response.text
    assert survivors() == []
