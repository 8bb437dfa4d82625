"""Pytest fixtures and hooks only: every test gets its own TOOLRUN_HOME and no SVC_* settings from outside.

The helpers the tests share (servers, clients, catalogs, keys...) are in the `support` package (tests/support/).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from support.cputime import pytest_runtest_protocol  # noqa: F401 - with TOOLRUN_CPU_LOG: each test's CPU (support/cputime.py)
from support.scheduling import PLAIN_SPEC, SuiteScheduling, copy_module_id, is_copy, is_door_file


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "toolrun-home"
    monkeypatch.setenv("TOOLRUN_HOME", str(home))
    for name in list(os.environ):
        if name.startswith("SVC_"):
            monkeypatch.delenv(name)
    # The test extra installs toolrun[semantic]: search is lexical (no model process) unless a test asks for it
    monkeypatch.setenv("SVC_SEARCH_SEMANTIC", "false")
    return home


# -- the door tests a second time with every speed trick off, in the same pytest-xdist run ---------------------
#
# `make test` runs the door tests (DOOR_FILES) twice: as they are, and with `TOOLRUN_SPEEDUPS=off` (the product
# must answer the same with every trick off, only slower). The switch is read when toolrun is imported, so the
# second run needs processes of its own: `--speedups-off-doors` (with `-n`) adds one pytest-xdist worker started
# with TOOLRUN_SPEEDUPS=off, collects each door file a second time as `<file>::speedups-off`, and schedules
# those copies on that worker only and everything else on the others (support/scheduling.py, which also keeps
# the tests of a file that starts its servers once on one worker). Without xdist:
# `TOOLRUN_SPEEDUPS=off pytest -m doors` (`make pytest-plain`).


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--speedups-off-doors",
        action="store_true",
        help="with -n: also run the door tests with TOOLRUN_SPEEDUPS=off, on one more worker (tests/conftest.py)",
    )


# A suite started in the background (`make test &`) inherits SIGINT ignored, and so would every `toolrun` a test starts
# (an ignored signal stays ignored across exec): the tests that press Ctrl-C on a waiting call need it as a terminal
# gives it. A handler, unlike "ignored", is reset to the default in a child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("speedups_off_doors") or hasattr(config, "workerinput"):
        return  # a worker has its copies collected below; only the controller starts workers
    if not config.getoption("tx", None):
        raise pytest.UsageError("--speedups-off-doors needs pytest-xdist workers: add -n auto (or -n N)")
    config.option.tx = [*config.option.tx, PLAIN_SPEC]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if parent.config.getoption("speedups_off_doors") and is_door_file(file_path):
        return pytest.Module.from_parent(parent, path=file_path, nodeid=copy_module_id(parent.config, file_path))
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_door_file(item.path):
            item.add_marker(pytest.mark.doors)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") not in ("load", "loadscope", "loadgroup", "loadfile", "worksteal"):
        return None  # `-d each` and the like: xdist's own
    return SuiteScheduling(config, log)


@pytest.fixture(autouse=True)
def _copies_run_with_the_speedups_off(request: pytest.FixtureRequest) -> None:
    if is_copy(request.node.nodeid):
        from toolrun import speedups

        if frozenset(speedups.NAMES) != speedups.OFF:
            pytest.fail(f"{request.node.nodeid} ran in a worker with speedups on: {sorted(speedups.OFF)} off")
