"""This process's id, kept current across `os.fork()` without a system call per read.

Objects that hold per-process resources (database connections, Redis pools, the epoll of a loop's
children, spawn threads) compare the pid they were made in with `pid()` to learn that they now live
in a forked worker (`serve --workers`) and must make their own. `os.getpid()` is a system call each
time, on paths every request takes; this value is refreshed by an at-fork hook instead.
"""

from __future__ import annotations

import os

_PID = os.getpid()


def _forked() -> None:
    global _PID
    _PID = os.getpid()


os.register_at_fork(after_in_child=_forked)


def pid() -> int:
    """The id of the running process (as `os.getpid()`)."""
    return _PID
