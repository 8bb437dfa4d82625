"""One concurrency pool for the whole server (issue 23.9): with `--workers 2`, `max_concurrent_calls` holds for
the server as a whole, however the kernel spreads connections over the workers.

A real `toolrun serve --workers 2`: each keep-alive connection stays with the worker that accepted it, and a
tool that prints its shell's parent tells which worker that is, so the tests can pile every call on one
worker (what an uneven spread does to a burst) and send the next one through the other."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.catalogs import SLEEPERS, unique_sleep
from support.http import JSON
from support.procs import pids_matching
from support.servers import ToolrunServer, serve_catalog, wait_until
from toolrun.state.memory import MemorySlots
from toolrun.state.shared_memory import SharedSlots

CAP = 6


class Connection:
    """One keep-alive connection, and the pid of the worker that serves it."""

    def __init__(self, port: int) -> None:
        self.http = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        status, text = self.post("ops.worker", "{}")
        assert status == 200, text
        self.worker = int(text)

    def post(self, key: str, body: str) -> tuple[int, str]:
        self.http.request("POST", f"/tools/{key}", body=body, headers=JSON)
        answer = self.http.getresponse()
        return answer.status, answer.read().decode()


OPENED: list[Connection] = []


@pytest.fixture(autouse=True)
def _close_connections() -> Iterator[None]:
    yield
    while OPENED:
        OPENED.pop().http.close()


def on_each_worker(port: int, count: int) -> tuple[list[Connection], list[Connection]]:
    """`count` connections served by one worker, and `count` served by the other."""
    by_worker: dict[int, list[Connection]] = {}
    for _ in range(200):
        connection = Connection(port)
        OPENED.append(connection)
        by_worker.setdefault(connection.worker, []).append(connection)
        if len(by_worker) == 2 and all(len(group) >= count for group in by_worker.values()):
            first, second = by_worker.values()
            return first[:count], second[:count]
    raise AssertionError(f"200 connections did not reach both workers {count} times each: {by_worker.keys()}")


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ToolrunServer]:
    settings = {"SVC_WORKERS": "2", "SVC_MAX_CONCURRENT_CALLS": str(CAP), **getattr(request, "param", {})}
    with serve_catalog(tmp_path, SLEEPERS, settings).start() as started:
        yield started


def concurrently(calls: list[tuple[Connection, str, str]]) -> list[tuple[int, str]]:
    results: list[tuple[int, str]] = [(0, "")] * len(calls)

    def run(index: int) -> None:
        connection, key, body = calls[index]
        results[index] = connection.post(key, body)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


@pytest.mark.parametrize("server", [{"SVC_QUEUE_TIMEOUT": "0"}], indirect=True)
def test_calls_piled_on_one_worker_all_run_while_the_server_is_under_its_cap_and_the_cap_holds_in_total(
    server: ToolrunServer,
) -> None:
    crowded, other = on_each_worker(server.port, CAP)
    seconds, marker = unique_sleep(3.0)  # a unique command line
    body = f'{{"seconds": {seconds!r}}}'
    results: list[tuple[int, str]] = []
    burst = threading.Thread(target=lambda: results.extend(concurrently([(c, "ops.sleep", body) for c in crowded])))
    burst.start()
    try:
        # Every one of the CAP calls runs at once, all on one worker (no 503, no queue: the queue is off).
        wait_until(lambda: len(pids_matching(marker, "sleep")) == CAP, 15, f"{CAP} sleeps running on one worker")
        # The server as a whole is full: a call through the other worker, idle until now, is refused at once.
        status, text = other[0].post("ops.hi", "{}")
        assert status == 503 and text.startswith("Overloaded: server busy: 6 tool processes"), (status, text)
        assert len(pids_matching(marker, "sleep")) == CAP
    finally:
        burst.join(60)
    assert [status for status, _ in results] == [200] * CAP, results
    assert other[0].post("ops.hi", "{}") == (200, "hi")  # the slots are free again, on both workers


@pytest.mark.parametrize("server", [{"SVC_QUEUE_TIMEOUT": "10"}], indirect=True)
def test_a_call_queued_on_one_worker_gets_the_slot_another_worker_frees(server: ToolrunServer) -> None:
    crowded, other = on_each_worker(server.port, CAP)
    seconds, marker = unique_sleep(2.0)  # a unique command line
    body = f'{{"seconds": {seconds!r}}}'
    results: list[tuple[int, str]] = []
    burst = threading.Thread(target=lambda: results.extend(concurrently([(c, "ops.sleep", body) for c in crowded])))
    burst.start()
    try:
        wait_until(lambda: len(pids_matching(marker, "sleep")) == CAP, 15, "the pool to fill on one worker")
        started = time.monotonic()
        status, text = other[0].post("ops.hi", "{}")  # waits in the other worker's queue for a slot
        waited = time.monotonic() - started
    finally:
        burst.join(60)
    assert (status, text) == (200, "hi")
    assert 0.2 < waited < 8, waited  # it waited for a freed slot (about 2 s), not the 10 s queue deadline
    assert [s for s, _ in results] == [200] * CAP


def test_the_shared_pool_counts_every_worker_and_a_replacement_worker_gives_back_what_a_dead_one_held() -> None:
    pool = SharedSlots(3, workers=2)
    pool.attach(0)
    assert pool.take() and pool.take()
    pool.attach(1)  # the same memory as another worker sees it (a fork shares it; one process stands in here)
    assert pool.take()
    assert not pool.take() and not pool.free() and pool.total() == (3, 0)
    assert pool.queue() and pool.total() == (3, 1)
    pool.unqueue()
    pool.give()
    assert pool.total() == (2, 0) and pool.free() and pool.take()
    assert not pool.take()
    pool.attach(0)  # worker 0 died holding two slots: its replacement gives them back
    assert pool.total() == (1, 0)
    assert pool.take() and pool.take() and not pool.take()
    local = MemorySlots(None)  # no cap: every call runs, counted
    assert all(local.take() for _ in range(1000)) and local.running == 1000
