"""Red team 12 on the timeout's kill in a thread (executor._kill_call, lead's ed7f602): a flood of timeouts.

A timed-out call's kill (procguard.kill_call: two or three scans of /proc, then the signals) runs in one of two kill
threads, so a timeout that comes while both are busy (other calls' kills: a flood of timeouts, scans made slow by a
busy host or by tools with large environments) waits for its turn, and its tool ran on meanwhile: with 60 tools
timing out together on this 2-core machine, each busy writing, a tool's last write came 13-16 s after its deadline
(their running processes took the CPU the kills needed). The call's process group is now stopped (SIGSTOP, one
signal, on the loop) the moment its deadline passes; the kill then finds it as it was, and kills it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from toolrun.exec import executor

ENV = {"PATH": "/usr/bin:/bin"}


def test_a_tool_stops_at_its_deadline_while_the_kill_threads_are_busy(tmp_path: Path) -> None:
    """On ed7f602 the tool wrote on for as long as the two kill threads were taken (here 1.5 s, by two kills
    held in their scans), then answered; now its writes stop at its deadline."""
    out = tmp_path / "writes"
    release = threading.Event()

    async def go() -> tuple[float, float]:
        await executor.run("true", timeout=5, env=ENV)
        busy = [executor._killer().submit(release.wait, 10) for _ in range(2)]  # two kills in their scans
        threading.Timer(1.5, release.set).start()
        started = time.time()
        result = await executor.run(f"while :; do date +%s.%N >> {out}; sleep 0.01; done", timeout=0.5, env=ENV)
        assert result.timed_out
        assert all(job.result() for job in busy)
        return started + 0.5, time.time()

    deadline, answered = asyncio.run(go())
    last = float(out.read_text().split()[-1])
    assert answered - deadline >= 1.0  # the answer still waits for the kill: the premise of this test
    assert last - deadline < 0.3, f"the tool wrote {last - deadline:.2f} s after its deadline"
