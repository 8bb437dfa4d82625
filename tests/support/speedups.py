"""Turn a speed trick off for one test, in this process: `override(monkeypatch, "pidfd")`.

`TOOLRUN_SPEEDUPS` is read once, when toolrun is imported (src/toolrun/speedups.py), and the modules that hold
a trick copy the answer into a module-level value. A test that compares a trick with its plain path in-process
sets that value through here, never by name in the test: HELD says, for each such trick, where it lives and
what it holds when off (tests/test_speedups.py checks it against a process started with the trick off).
The tricks decided when an object is built (`hot_routes`, `mcp_fast_path`, `cli_coercion`) are switched by
starting a process with `TOOLRUN_SPEEDUPS` in its environment.
"""

from __future__ import annotations

import importlib

import pytest

# speedup -> (module, module-level name, its value with the trick off)
HELD: dict[str, tuple[str, str, object]] = {
    "direct_exec": ("toolrun.exec.executor", "DIRECT_EXEC", False),
    "pidfd": ("toolrun.exec.executor", "_HAS_PIDFD", False),
    "threaded_spawn": ("toolrun.exec.executor", "THREADED_FROM", 1 << 62),
    "posix_spawn": ("toolrun.exec.spawn", "_LIBC", None),
    "plain_render": ("toolrun.exec.render", "PLAIN_RENDER", False),
    "coalesce": ("toolrun.server.protocol", "COALESCE", False),
    "keepalive_timer": ("toolrun.server.protocol", "KEEPALIVE_TIMER", False),
    "jail_pool": ("toolrun.exec.sandboxpool", "ENABLED", False),
}


def override(monkeypatch: pytest.MonkeyPatch, *off: str) -> None:
    """The speedups `off` are off in this process until the test ends (KeyError for one not held in a module)."""
    for name in off:
        module, attr, value = HELD[name]
        monkeypatch.setattr(importlib.import_module(module), attr, value)
