"""`make test`'s scheduler (tests/support/scheduling.py), driven with stand-in workers: the tests of a file in
ONE_WORKER go to one worker, in order; a speedups-off copy goes to the speedups-off worker only; every test runs
once; no worker is told to stop while tests of its kind are left; the longest units are dealt first."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from support import durations
from support.scheduling import COPY, ONE_WORKER, SuiteScheduling, work_unit

TESTS = Path(__file__).resolve().parent


class Worker:
    """What the scheduler sees of a pytest-xdist worker: its spec's environment, what it was sent, and stop."""

    def __init__(self, name: str, plain: bool = False) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name, spec=SimpleNamespace(env={"TOOLRUN_SPEEDUPS": "off"} if plain else {}))
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down, f"{self.name} got tests after it was told to stop"
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


COLLECTION = [
    *(f"tests/test_oauth.py::test_o{i}" for i in range(5)),
    *(f"tests/test_ui_browser.py::test_b{i}" for i in range(3)),
    *(f"tests/test_ui_share.py::test_s{i}" for i in range(2)),
    *(f"tests/test_render.py::test_r{i}" for i in range(12)),
    *(f"tests/test_mcp_replicas.py::test_m{i}" for i in range(3)),
    *(f"tests/test_mcp_replicas.py::{COPY}::test_m{i}" for i in range(3)),
    *(f"tests/test_http.py::{COPY}::test_h{i}" for i in range(4)),
]


def run(workers: list[Worker]) -> dict[str, list[str]]:
    """Schedule COLLECTION on `workers`, completing their tests one by one in turn: what each one ran."""
    config: Any = SimpleNamespace(getvalue=lambda name: [f"popen//id={w.name}" for w in workers])
    scheduler = SuiteScheduling(config, log=SimpleNamespace(loadscopesched=lambda *args: None))
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, COLLECTION)
    scheduler.schedule()
    done = {w.name: 0 for w in workers}
    while any(done[w.name] < len(w.sent) for w in workers):
        for worker in workers:
            if done[worker.name] < len(worker.sent):
                scheduler.mark_test_complete(worker, worker.sent[done[worker.name]])
                done[worker.name] += 1
    assert all(w.shutting_down for w in workers), "a worker was never told to stop: the run would hang"
    return {w.name: [COLLECTION[i] for i in w.sent] for w in workers}


def test_each_test_runs_once_a_file_of_one_worker_stays_together_and_copies_go_to_the_plain_worker() -> None:
    ran = run([Worker("gw0"), Worker("gw1"), Worker("gw2", plain=True)])
    assert sorted(t for tests in ran.values() for t in tests) == sorted(COLLECTION)
    assert all(f"::{COPY}::" in t for t in ran["gw2"])
    assert not any(f"::{COPY}::" in t for t in ran["gw0"] + ran["gw1"])
    for unit in ("oauth", "chromium", "mcp_replicas"):
        holders = [name for name, tests in ran.items() if any(work_unit(t) == unit for t in tests)]
        assert len(holders) == 1, (unit, ran)
        tests = [t for t in ran[holders[0]] if work_unit(t) == unit]
        assert tests == [t for t in COLLECTION if work_unit(t) == unit]  # in the file's order
    assert {name for name, tests in ran.items() if any("test_render" in t for t in tests)} == {"gw0", "gw1"}


def test_without_a_plain_worker_nothing_waits_for_one() -> None:
    ran = run([Worker("gw0"), Worker("gw1")])
    assert sorted(t for tests in ran.values() for t in tests) == sorted(t for t in COLLECTION if COPY not in t)


def test_every_file_of_one_worker_exists() -> None:
    assert [name for name in ONE_WORKER if not (TESTS / name).is_file()] == []


def test_the_longest_units_are_dealt_first_by_the_seconds_of_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long test that came last in the collection (a file late in the alphabet) must not start last and run
    alone at the end: the scheduler deals by the seconds of support/durations.py, not by collection order."""
    slow = {"tests/test_render.py::test_r11": 60.0, f"tests/test_http.py::{COPY}::test_h3": 30.0}
    monkeypatch.setattr(durations, "seconds", lambda nodeid: slow.get(nodeid, durations.DEFAULT))
    workers = [Worker("gw0"), Worker("gw1"), Worker("gw2", plain=True)]
    run(workers)
    assert COLLECTION[workers[0].sent[0]] == "tests/test_render.py::test_r11"
    assert COLLECTION[workers[2].sent[0]] == f"tests/test_http.py::{COPY}::test_h3"
    assert COLLECTION[workers[1].sent[0]] == "tests/test_oauth.py::test_o0"  # then the biggest unit: 5 tests


def test_the_table_of_durations_names_tests_by_their_node_ids() -> None:
    listed = durations.table()
    assert len(listed) > 100 and all(seconds >= durations.LISTED for seconds in listed.values())
    files = {nodeid.split("::", 1)[0] for nodeid in listed}
    assert all(name.startswith("tests/test_") and name.endswith(".py") for name in files), files
    assert sum((TESTS.parent / name).is_file() for name in files) >= 0.9 * len(files)


def test_the_serial_part_finds_each_serial_test_by_the_mark_written_in_its_file() -> None:
    """`make pytest` runs the serial part on the test files that write the serial mark (`pytest.mark.` and
    `serial`) only (the Makefile's SERIAL_FILES, a grep): a `serial` mark given any other way (a conftest or support
    hook, an alias imported from elsewhere) would never run. Every file that names the mark must be such a test file.
    (This file names it in pieces, so that the grep does not pick it.)"""
    naming = {path for path in TESTS.rglob("*.py") if re.search(r"\bserial\b", path.read_text(encoding="utf-8"))}
    naming.discard(Path(__file__).resolve())
    written = re.compile(r"\bmark\." + "serial")
    hidden = [path for path in naming if not path.name.startswith("test_") or not written.search(path.read_text())]
    assert hidden == []
    assert len(naming) >= 1  # test_reliability's load tests
