"""Red team 10 on jails prepared ahead (issue 34): a call cancelled while its jail waits for a starter thread.

A call that finds no jail ready plans one (its bound paths opened and checked: descriptors held by the server) and
hands the plan to one of the pool's two starter threads. While both threads are busy (refills, other calls' jails:
a burst of sandboxed calls keeps them busy) the start waits in their queue; a client that goes away meanwhile
cancels the call, and with it the queued start, which then never runs. On the code before the fix nothing closed
that plan: every such call left the server holding its bound paths' descriptors for good (two a call here), so a
caller that sends sandboxed calls and hangs up fills the server's descriptor table and keeps bound folders busy.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import jails
from support.binaries import require_binary
from support.speedups import hold
from toolrun.exec import executor, sandboxpool
from toolrun.models import Sandbox

base = jails.base


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    require_binary("bwrap")
    hold(monkeypatch, "jail_pool", True)
    yield
    sandboxpool.close_all()


def _held(path: Path) -> int:
    """Descriptors of this process that lead to `path`."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                count += 1
        except OSError:
            pass
    return count


def test_a_call_cancelled_while_its_jail_waits_for_a_starter_leaves_no_descriptor(pool: None, base: Path) -> None:
    """On the code before the fix the server held 2 descriptors of the bound folder per cancelled call (10 here)."""
    data = base / "data"
    data.mkdir(mode=0o755)
    box = Sandbox(profile="queued", network="none", readable=(str(data),))
    gate = threading.Event()

    async def go() -> None:
        busy = [sandboxpool._starter().submit(gate.wait) for _ in range(sandboxpool.STARTERS)]
        try:
            for _ in range(5):
                call = asyncio.ensure_future(executor.run("echo hi", timeout=10, env={}, sandbox=box))
                await asyncio.sleep(0.05)  # planned (its paths opened), its start queued behind the busy threads
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
        finally:
            gate.set()
        await asyncio.wrap_future(busy[0])
        await asyncio.wrap_future(sandboxpool._starter().submit(lambda: None))  # the queue has moved on

    asyncio.run(go())
    assert _held(data) == 0
    # and the profile still works: nothing half-made was left to take
    done = asyncio.run(executor.run(f"ls -d {data}", timeout=10, env={"PATH": "/usr/bin:/bin"}, sandbox=box))
    assert (done.returncode, done.stdout) == (0, f"{data}\n"), done
