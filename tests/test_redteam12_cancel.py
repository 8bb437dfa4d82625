"""Red team 12 on the timeout's kill in a thread (executor._kill_call, lead's ed7f602).

A timed-out or cancelled exec call hands procguard.kill_call to a thread and awaits it to its end, even when the call
is cancelled again meanwhile, then re-raises the cancel. The call's clean-up after the kill (the wait for the exit,
the reap of the shell, the close of its pipes and of a jail's descriptors, the count of running calls) sat after that
await, outside the `finally` that does it: a call cancelled a second time during its kill (a client gone while the
server stops, an outer deadline and a disconnect) skipped all of it. Its shell stayed a zombie for the life of the
server and its pipes stayed open in the loop's epoll: each such call leaked descriptors until the server could open
no more.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from toolrun.exec import executor

ENV = {"PATH": "/usr/bin:/bin"}


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("cancels", [2, 3])
def test_a_call_cancelled_again_during_its_kill_reaps_its_shell_and_closes_its_pipes(
    tmp_path: Path, cancels: int
) -> None:
    """On ed7f602 the shell was left a zombie (os.waitpid still found it) and the call's pipes stayed open."""
    mark = tmp_path / "shell"

    async def go() -> tuple[int, set[str], set[str], int, int]:
        await executor.run("true", timeout=5, env=ENV)  # the loop's watcher (its epoll) exists before the count
        before, running = _fds(), executor._RUNNING
        call = asyncio.ensure_future(executor.run(f"echo $$ > {mark}; sleep 30", timeout=30, env=ENV))
        while not mark.exists() or not mark.read_text().strip():
            await asyncio.sleep(0.005)
        shell = int(mark.read_text())
        for _ in range(cancels):  # the first cancel starts the kill (in its thread); the next ones land during it
            call.cancel()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(0.3)  # anything the loop still had to do for the call
        return shell, before, _fds(), running, executor._RUNNING

    shell, before, after, running, running_after = asyncio.run(go())
    assert after - before == set(), f"descriptors left open by the cancelled call: {sorted(after - before)}"
    try:
        left = os.waitpid(shell, os.WNOHANG)  # (0, 0): still running; (pid, status): a zombie, reaped only now
    except ChildProcessError:  # reaped by the call: what must be
        left = None
    assert left is None, f"the cancelled call's shell was never reaped: {left}"
    assert running_after == running
