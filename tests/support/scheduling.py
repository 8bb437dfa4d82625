"""How `make test` hands tests to pytest-xdist workers (tests/conftest.py): which files are door files, the node ids
of their speedups-off copies (`--speedups-off-doors`), the files that run on one worker, and the scheduler.

A test is a work unit of its own, except in the files of `ONE_WORKER`: a file that starts its servers once for
all its tests (module-scoped fixtures) is one unit, run in order on one worker, so the servers start once; files
that name the same unit share it (the browser files: at most two Chromiums at a time). With `--speedups-off-doors` the
copies go to the worker started with TOOLRUN_SPEEDUPS=off and every other unit to the other workers. The units
are dealt longest first, by the seconds each test took in a full run (support/durations.py).

(A table rather than `xdist_group` marks: pytest-xdist 3.8 tags a grouped test by rewriting `item._nodeid`, which
pytest 9.2 no longer reads, so `--dist loadgroup` groups nothing.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from . import durations

DOOR_FILES = (
    "test_http.py",
    "test_mcp*.py",
    "test_cli.py",
    "test_doors_agree.py",
    "test_speedups.py",
    "test_dispatch.py",
    "test_route_auth.py",
)
NOT_DOOR_FILES = ("test_mcp_fast.py",)  # it compares the /mcp fast path with the SDK itself: both ways already
COPY = "speedups-off"  # the copies' node ids: tests/test_http.py::speedups-off::test_...
PLAIN_SPEC = "popen//env:TOOLRUN_SPEEDUPS=off"  # the worker of the copies (execnet sets it before pytest starts)

# file -> its work unit: the tests of a unit run in order on one worker
ONE_WORKER = {
    "test_cli_client.py": "cli_client",
    "test_hostile.py": "hostile",
    "test_jobs_mcp.py": "jobs_mcp",
    "test_jobs_people.py": "jobs_people",
    "test_jobs_redteam.py": "jobs_redteam",
    "test_mcp_replicas.py": "mcp_replicas",
    "test_mcp_tasks.py": "mcp_tasks",
    "test_oauth.py": "oauth",
    "test_redis.py": "redis",
    "test_reliability.py": "reliability",
    "test_tracing.py": "tracing",
    # Chromium, at most two at a time: the browser files in two units of about the same length (in one unit they
    # were the longest chain of a run: 209 s of tests run alone, 136 s as these two units on two workers)
    "test_ui_browser.py": "chromium",
    "test_ui_sandbox.py": "chromium",
    "test_ui_share.py": "chromium",
    "test_oauth_ui.py": "chromium",
    "test_jobs_ui.py": "chromium-jobs",
    "test_ui_results.py": "chromium-jobs",
}


def is_door_file(path: Path) -> bool:
    return path.name not in NOT_DOOR_FILES and any(path.match(f"tests/{pattern}") for pattern in DOOR_FILES)


def copy_module_id(config: pytest.Config, path: Path) -> str:
    return f"{path.relative_to(config.rootpath).as_posix()}::{COPY}"


def is_copy(nodeid: str) -> bool:
    return f"::{COPY}::" in nodeid


def plain_node(node: Any) -> bool:
    return bool(node.gateway.spec.env.get("TOOLRUN_SPEEDUPS") == "off")


def work_unit(nodeid: str) -> str:
    """The unit of a test: its node id, or its file's unit in ONE_WORKER (a copy's: `<unit>::speedups-off`)."""
    unit = ONE_WORKER.get(Path(nodeid.split("::", 1)[0]).name)
    if unit is None:
        return nodeid
    return f"{unit}::{COPY}" if is_copy(nodeid) else unit


class SuiteScheduling(LoadScopeScheduling):
    """xdist's scope scheduling over `work_unit`s, each worker handed only the units of its kind (copies, or the
    others): a unit is all copies or none, so its first test tells its kind."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)

    def _eligible(self, node: Any) -> str | None:
        plain = plain_node(node)
        return next((scope for scope, unit in self.workqueue.items() if is_copy(next(iter(unit))) == plain), None)

    def _assign_work_unit(self, node: Any) -> None:
        scope = self._eligible(node)
        if scope is None:
            node.shutdown()  # nothing of its kind is left: it runs what it holds, then stops
            return
        unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(nodeid) for nodeid, done in unit.items() if not done])

    def _reschedule(self, node: Any) -> None:
        if node.shutting_down or self._pending_of(self.assigned_work[node]) > 2:
            return
        self._assign_work_unit(node)

    def schedule(self) -> None:
        """loadscope's first round without its shutting down of workers beyond the number of units (it counts
        units of both kinds, and could stop the only worker of one kind); the longest units first (the seconds
        of support/durations.py), so a long unit starts early rather than last and alone."""
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self._reschedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(next(iter(self.registered_collections.values())))
        units: dict[str, dict[str, bool]] = {}
        for nodeid in self.collection:
            units.setdefault(self._split_scope(nodeid), {})[nodeid] = False
        for scope, unit in sorted(units.items(), key=lambda item: -sum(map(durations.seconds, item[1]))):
            self.workqueue[scope] = unit
        for node in self.nodes:
            self._assign_work_unit(node)
        for node in self.nodes:  # a worker runs a test once it holds the next one: give each a second unit
            self._reschedule(node)
