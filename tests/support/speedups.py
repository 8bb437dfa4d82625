"""Turn a speed trick off for one test, in this process: `override(monkeypatch, "pidfd")`.

`TOOLRUN_SPEEDUPS` is read once, when toolrun is imported (src/toolrun/speedups.py), and the modules that hold
a trick copy the answer into a module-level value. A test that compares a trick with its plain path in-process
sets that value through here (`override`; `hold` for another value; `turn_off` in a child's script), never by
name in the test: HELD says, for each such trick, where it lives and what it holds when off (tests/test_speedups.py
checks it against a process started with the trick off). The tricks decided when an object is built
(`hot_routes`, `mcp_fast_path`, `cli_coercion`) are switched by starting a process with `TOOLRUN_SPEEDUPS` in its
environment, or in-process for the objects built after `build_without`.
"""

from __future__ import annotations

import importlib

import pytest

from toolrun import speedups

# speedup -> (module, module-level name, its value with the trick off)
HELD: dict[str, tuple[str, str, object]] = {
    "direct_exec": ("toolrun.exec.executor", "DIRECT_EXEC", False),
    "pidfd": ("toolrun.exec.executor", "HAS_PIDFD", False),
    "threaded_spawn": ("toolrun.exec.executor", "THREADED_FROM", 1 << 62),
    "exit_first": ("toolrun.exec.executor", "EXIT_FIRST", False),
    "posix_spawn": ("toolrun.exec.spawn", "LIBC", None),
    "plain_render": ("toolrun.exec.render", "PLAIN_RENDER", False),
    "coalesce": ("toolrun.server.protocol", "COALESCE", False),
    "keepalive_timer": ("toolrun.server.protocol", "KEEPALIVE_TIMER", False),
    "jail_pool": ("toolrun.exec.sandboxpool", "ENABLED", False),
    "direct_answer": ("toolrun.server.protocol", "DIRECT_ANSWER", False),
}


def override(monkeypatch: pytest.MonkeyPatch, *off: str) -> None:
    """The speedups `off` are off in this process until the test ends (KeyError for one not held in a module)."""
    for name in off:
        hold(monkeypatch, name, HELD[name][2])


def hold(monkeypatch: pytest.MonkeyPatch, name: str, value: object) -> None:
    """The module-level value of the speedup `name` is `value` until the test ends: a trick on whatever the
    environment said (`hold(monkeypatch, "direct_exec", True)`), or one pushed further (`hold(monkeypatch,
    "threaded_spawn", 1)`: every call spawns from the threads)."""
    module, attr, _ = HELD[name]
    monkeypatch.setattr(importlib.import_module(module), attr, value)


def turn_off(*off: str) -> None:
    """`override` for a whole throwaway process (a script a test runs in a child): nothing is put back."""
    for name in off:
        module, attr, value = HELD[name]
        setattr(importlib.import_module(module), attr, value)


def build_without(monkeypatch: pytest.MonkeyPatch, *off: str) -> None:
    """The speedups `off` are off for what this process builds from now on until the test ends: for the tricks
    decided when an object is built (`hot_routes`, `mcp_fast_path`), which read `toolrun.speedups.on` then."""
    unknown = [name for name in off if name not in speedups.NAMES]
    if unknown:
        raise KeyError(f"not speedups: {unknown}")
    monkeypatch.setattr(speedups, "OFF", speedups.OFF | frozenset(off))
