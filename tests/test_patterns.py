"""`pattern` is matched by RE2 (linear time), after the length and value bounds.

Python's `re` backtracks: `(a+)+b` against 28 characters took seconds, on the event loop, so one
request stalled every other one (`/healthz` included). RE2 has no catastrophic case; patterns it
does not support (backreferences, lookaround) are catalog errors with their position.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from support.catalogs import write_catalog
from support.http import JSON
from support.servers import ToolrunServer
from toolrun import params
from toolrun.errors import ParamError
from toolrun.models import EXEC_RETURN_TYPE, Param, ToolSpec

CATASTROPHIC = "(a+)+b"


def tool(*declared: Param) -> ToolSpec:
    return ToolSpec("t.tool", "tool", "exec", ("t",), False, "", declared, EXEC_RETURN_TYPE, "", "true")


def test_a_catastrophic_pattern_answers_at_once() -> None:
    spec = tool(Param("s", "str", True, pattern=CATASTROPHIC))
    started = time.perf_counter()
    with pytest.raises(ParamError, match="does not match"):
        params.validate(spec, {"s": "a" * 5000 + "!"})
    assert time.perf_counter() - started < 0.5
    assert params.validate(spec, {"s": "aaab"}) == {"s": "aaab"}


def test_the_length_bound_is_checked_before_the_pattern() -> None:
    spec = tool(Param("s", "str", True, pattern="[0-9]+", max=20))
    with pytest.raises(ParamError, match="length 40 is above the maximum 20"):
        params.validate(spec, {"s": "x" * 40})


def test_a_pattern_the_engine_refuses_names_the_reason() -> None:
    with pytest.raises(ValueError, match="RE2"):
        params.compile_pattern(r"(a)\1")


def test_a_catastrophic_pattern_does_not_stall_a_running_server(tmp_path: Path) -> None:
    catalog = write_catalog(
        tmp_path,
        "group: t\ntools:\n  - name: match\n    public: true\n    exec: printf ok\n"
        f"    params:\n      - {{name: s, type: str, pattern: '{CATASTROPHIC}', max: 64}}\n",
    )
    with ToolrunServer(tmp_path / "server", catalog).start() as server, httpx.Client(timeout=5) as client:
        answers: list[tuple[int, float]] = []

        def attack() -> None:
            with httpx.Client(timeout=60) as attacker:
                for _ in range(3):
                    started = time.perf_counter()
                    body = {"s": "a" * 28 + "!"}
                    response = attacker.post(f"{server.url}/tools/t.match", headers=JSON, json=body)
                    answers.append((response.status_code, time.perf_counter() - started))

        thread = threading.Thread(target=attack)
        thread.start()
        health: list[float] = []
        while thread.is_alive() and len(health) < 200:
            started = time.perf_counter()
            assert client.get(f"{server.url}/healthz").status_code == 200
            health.append(time.perf_counter() - started)
        thread.join(timeout=60)

    assert [status for status, _ in answers] == [400, 400, 400]
    assert max(seconds for _, seconds in answers) < 1.0, answers
    assert not health or max(health) < 1.0, max(health)
