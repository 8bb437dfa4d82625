"""The door tests a second time with every speed trick off (`--speedups-off-doors`, tests/conftest.py): which
files, the copies' node ids, and the pytest-xdist scheduler that hands the copies to the worker started with
TOOLRUN_SPEEDUPS=off and every other test to the other workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScheduling

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


def is_door_file(path: Path) -> bool:
    return path.name not in NOT_DOOR_FILES and any(path.match(f"tests/{pattern}") for pattern in DOOR_FILES)


def copy_module_id(config: pytest.Config, path: Path) -> str:
    return f"{path.relative_to(config.rootpath).as_posix()}::{COPY}"


def is_copy(nodeid: str) -> bool:
    return f"::{COPY}::" in nodeid


def plain_node(node: Any) -> bool:
    return bool(node.gateway.spec.env.get("TOOLRUN_SPEEDUPS") == "off")


class DoorsScheduling(LoadScheduling):
    """xdist's `load` scheduling, each worker handed only the tests of its kind (copies, or the others)."""

    def _eligible(self, node: Any) -> list[int]:
        assert self.collection is not None
        plain = plain_node(node)
        return [i for i in self.pending if is_copy(self.collection[i]) == plain]

    def _send_tests(self, node: Any, num: int) -> None:
        chosen = self._eligible(node)[:num]
        if chosen:
            taken = set(chosen)
            self.pending[:] = [i for i in self.pending if i not in taken]
            self.node2pending[node].extend(chosen)
            node.send_runtest_some(chosen)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        super().check_schedule(node, duration)
        if self.collection is not None and not node.shutting_down and not self._eligible(node):
            node.shutdown()  # nothing of its kind is left: it runs what it holds, then stops

    def schedule(self) -> None:
        super().schedule()
        if self.collection is not None:
            for node in self.nodes:  # the first round may have found nothing of a node's kind in its slice
                if not self.node2pending[node]:
                    self.check_schedule(node)
